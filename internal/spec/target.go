package spec

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

// Target names the object an upgrade changes.
type Target struct {
	Kind      string // the kind's Name (lower case), as kind.Descriptor.Name
	Namespace string
	Name      string
}

// String returns the target in the form ParseTarget reads:
// KIND/NAMESPACE/NAME with the kind's Name.
func (t Target) String() string {
	return t.Kind + "/" + t.Namespace + "/" + t.Name
}

// ParseTarget reads the flag form KIND/NAMESPACE/NAME. The kind is one of
// kinds, by name or spelling, case-insensitively; the namespace must be a
// DNS-1123 label and the name a DNS-1123 subdomain. Errors are bad input
// quoting s.
func ParseTarget(s string, kinds kind.Set) (Target, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		ex := ""
		if len(kinds) > 0 {
			ex = ", as in " + kinds[0].Example
		}
		return Target{}, outcome.BadInput(fmt.Errorf("target %q: want KIND/NAMESPACE/NAME%s", s, ex))
	}
	k, err := targetKind(parts[0], kinds)
	if err == nil {
		err = checkNamespace(parts[1])
	}
	if err == nil {
		err = checkName(parts[2])
	}
	if err != nil {
		return Target{}, outcome.BadInput(fmt.Errorf("target %q: %w", s, err))
	}
	return Target{Kind: k, Namespace: parts[1], Name: parts[2]}, nil
}

// targetKind returns the Name of a registered kind, given by its name or
// spelling.
func targetKind(s string, kinds kind.Set) (string, error) {
	if d, ok := kinds.Lookup(s); ok {
		return d.Name, nil
	}
	return "", fmt.Errorf("unsupported kind %q (want %s)", s, kind.Or(kinds.Spellings()))
}

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func checkNamespace(s string) error {
	if len(s) > 63 || !dnsLabel.MatchString(s) {
		return fmt.Errorf("namespace %q is not a valid namespace (lower case letters, digits and '-', at most 63)", s)
	}
	return nil
}

func checkName(s string) error {
	if len(s) > 253 || !dnsSubdomain.MatchString(s) {
		return fmt.Errorf("name %q is not a valid object name (lower case letters, digits, '-' and '.', at most 253)", s)
	}
	return nil
}
