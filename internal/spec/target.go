package spec

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// KindManagedChart is a Rancher ManagedChart (management.cattle.io/v3).
const KindManagedChart = "ManagedChart"

// KindHelmChart is a k3s/RKE2 HelmChart (helm.cattle.io/v1).
const KindHelmChart = "HelmChart"

// KindRelease is a Helm 3 release.
const KindRelease = "Release"

// Kinds are the canonical spellings of the target kinds, one per adapter
// in the kind registry (internal/targets; a test there keeps the two
// equal), so that a spec names a kind no adapter serves by file and line.
var Kinds = []string{KindManagedChart, KindHelmChart, KindRelease}

// OwnSourceKinds are the kinds whose object can name its chart source
// itself (a HelmChart's spec.repo): for them chart.source may be left
// out.
var OwnSourceKinds = []string{KindHelmChart}

// NamesOwnSource reports whether a target of kind may leave its chart
// source out.
func NamesOwnSource(kind string) bool {
	for _, k := range OwnSourceKinds {
		if strings.EqualFold(k, kind) {
			return true
		}
	}
	return false
}

// Target names the object an upgrade changes.
type Target struct {
	Kind      string // canonical spelling, e.g. KindManagedChart
	Namespace string
	Name      string
}

// String returns the target in the form ParseTarget reads, with the kind in
// lower case: managedchart/fleet-local/harvester.
func (t Target) String() string {
	return strings.ToLower(t.Kind) + "/" + t.Namespace + "/" + t.Name
}

// ParseTarget reads the flag form KIND/NAMESPACE/NAME, as in
// managedchart/fleet-local/harvester. The kind is case-insensitive and must
// be one of Kinds; the namespace must be a DNS-1123 label and the name a
// DNS-1123 subdomain. Errors are bad input quoting s.
func ParseTarget(s string) (Target, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Target{}, outcome.BadInput(fmt.Errorf("target %q: want KIND/NAMESPACE/NAME, as in managedchart/fleet-local/harvester", s))
	}
	kind, err := targetKind(parts[0])
	if err == nil {
		err = checkNamespace(parts[1])
	}
	if err == nil {
		err = checkName(parts[2])
	}
	if err != nil {
		return Target{}, outcome.BadInput(fmt.Errorf("target %q: %w", s, err))
	}
	return Target{Kind: kind, Namespace: parts[1], Name: parts[2]}, nil
}

// targetKind returns the canonical spelling of a supported kind.
func targetKind(s string) (string, error) {
	for _, k := range Kinds {
		if strings.EqualFold(s, k) {
			return k, nil
		}
	}
	return "", fmt.Errorf("unsupported kind %q (want %s)", s, strings.Join(Kinds, " or "))
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
