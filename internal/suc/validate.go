package suc

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
)

// OptionError says what is wrong with one option. Option is the name of
// the `chart-upgrader plan` flag that sets it, without dashes.
type OptionError struct {
	Option string
	Value  string
	Reason string
}

func (e *OptionError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("--%s: %s", e.Option, e.Reason)
	}
	return fmt.Sprintf("--%s %q: %s", e.Option, e.Value, e.Reason)
}

// optionErrors are the problems of one PlanOptions, in field order.
type optionErrors []error

func (e optionErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e optionErrors) Unwrap() []error { return e }

// An image repository as container registries take it: [host[:port]/]path,
// path components lower-case (the grammar of the distribution reference).
var (
	domainPart = `[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?`
	domain     = domainPart + `(?:\.` + domainPart + `)*(?::[0-9]+)?`
	pathPart   = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	repository = regexp.MustCompile(`^(?:` + domain + `/)?` + pathPart + `(?:/` + pathPart + `)*$`)
	// imageTag is what a tag may be; the controller turns '+' into '-'.
	imageTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// validate returns one error per invalid option of o (defaults applied).
func (o PlanOptions) validate() optionErrors {
	var errs optionErrors
	bad := func(option, value, format string, args ...any) {
		errs = append(errs, &OptionError{Option: option, Value: value, Reason: fmt.Sprintf(format, args...)})
	}
	dns := func(option, value string, check func(string) []string) {
		if value == "" {
			bad(option, value, "required")
		} else if msgs := check(value); len(msgs) > 0 {
			bad(option, value, "%s", strings.Join(msgs, "; "))
		}
	}
	dns("name", o.Name, validation.IsDNS1123Label)
	dns("namespace", o.Namespace, validation.IsDNS1123Label)
	dns("spec-secret", o.SpecSecret, validation.IsDNS1123Subdomain)
	dns("service-account", o.ServiceAccount, validation.IsDNS1123Subdomain)

	if reason := imageProblem(o.Image); reason != "" {
		bad("image", o.Image, "%s", reason)
	}
	switch {
	case o.Version == "" && o.Channel == "":
		bad("version", "", "give --version (a pinned chart version) or --channel (a system-upgrade-controller channel URL)")
	case o.Version != "" && o.Channel != "":
		bad("version", o.Version, "give --version or --channel %q, not both", o.Channel)
	case o.Version != "":
		if !imageTag.MatchString(strings.ReplaceAll(o.Version, "+", "-")) {
			bad("version", o.Version, "not usable as an image tag (letters, digits, '_', '.', '-' and '+', at most 128, not starting with '.' or '-'): system-upgrade-controller tags the image with it")
		}
	default:
		if u, err := url.Parse(o.Channel); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("channel", o.Channel, "want an http(s) URL such as http://chart-upgrader-channels.system-upgrade.svc/v1/channels/stable")
		}
	}

	if key, value, ok := cutLabel(o.NodeSelector); !ok {
		bad("node-selector", o.NodeSelector, "want one label as key=value, e.g. %s", DefaultNodeSelector)
	} else if msgs := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(value)...); len(msgs) > 0 {
		bad("node-selector", o.NodeSelector, "%s", strings.Join(msgs, "; "))
	}
	if o.Concurrency < 1 {
		bad("concurrency", fmt.Sprint(o.Concurrency), "want at least 1")
	}
	if o.WaitTimeout < 0 {
		bad("wait-timeout", o.WaitTimeout.String(), "want a positive duration")
	}
	if _, err := host.ParseOwner(o.RunAs); err != nil {
		bad("run-as", o.RunAs, "want UID:GID, two numbers from 0 to 2147483647 (0:0 runs as root without capabilities)")
	}
	if o.Drain != nil && o.Drain.Timeout < 0 {
		bad("drain", o.Drain.Timeout.String(), "the drain timeout must not be negative")
	}
	return errs
}

// imageProblem says why image is not a repository without tag, or "".
func imageProblem(image string) string {
	if image == "" {
		return "required: the image repository without a tag, e.g. ghcr.io/chart-upgrader/chart-upgrader"
	}
	if i := strings.Index(image, "@"); i >= 0 {
		return fmt.Sprintf("has a digest (%s): give the repository only; system-upgrade-controller tags it with the resolved version", image[i:])
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if i := strings.Index(last, ":"); i >= 0 {
		return fmt.Sprintf("has a tag (%s): give the repository only; system-upgrade-controller tags it with the resolved version", last[i:])
	}
	if !repository.MatchString(image) {
		return "not an image repository ([host[:port]/]path, path in lower case)"
	}
	return ""
}

// cutLabel splits key=value.
func cutLabel(s string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(s, "=")
	return key, value, ok && key != ""
}
