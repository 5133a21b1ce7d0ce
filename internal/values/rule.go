package values

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Policy decides one subtree of the new user values (docs/design.md §5.4).
type Policy string

// The policies. PolicyUser applies to every path no rule matches.
const (
	PolicyUser     Policy = "user"
	PolicyChart    Policy = "chart"
	PolicyFollow   Policy = "follow"
	PolicyKeep     Policy = "keep"
	PolicyReadonly Policy = "readonly"
	PolicyMax      Policy = "max"
	PolicyMin      Policy = "min"
	PolicyLive     Policy = "live"
	PolicyOnce     Policy = "once"
	PolicyRemove   Policy = "remove"
	// PolicyAdopt takes the live value of a field an operator changed in
	// the cluster (Input.Adopt), else behaves as user.
	PolicyAdopt Policy = "adopt"
)

// Policies lists every policy in the order the documentation gives them.
var Policies = []Policy{PolicyUser, PolicyChart, PolicyFollow, PolicyKeep, PolicyReadonly,
	PolicyMax, PolicyMin, PolicyLive, PolicyOnce, PolicyRemove, PolicyAdopt}

// ParsePolicy returns the policy named s, or an error listing the valid names.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(Policies))
	for i, p := range Policies {
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown policy %q (want one of %s)", s, strings.Join(names, ", "))
}

// needsSource reports whether the policy reads a live object.
func (p Policy) needsSource() bool { return p == PolicyLive || p == PolicyOnce }

// ObjectRef names a Kubernetes object. Namespace is empty for cluster-scoped
// objects.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s/%s", r.APIVersion, r.Kind, r.Name)
	}
	return fmt.Sprintf("%s %s %s/%s", r.APIVersion, r.Kind, r.Namespace, r.Name)
}

// IsSecret reports whether the object is a core Secret, whose data the
// reports redact.
func (r ObjectRef) IsSecret() bool { return r.APIVersion == "v1" && r.Kind == "Secret" }

// Rule decides the paths its pattern matches, or whose ancestor it matches.
type Rule struct {
	Pattern Pattern
	Policy  Policy
	Source  *ObjectRef // live and once only
	Expr    *Expr      // live and once only
	// Unless, for a live rule, replaces one live value by another: what
	// a migration script does to a setting left at its old default.
	Unless *Unless
}

// Unless is a live rule's exception: when the live value equals Equals
// and no user value is set, the value is Then, or, with ThenDefault, the
// new chart's default.
type Unless struct {
	Equals      any
	Then        any
	ThenDefault bool
}

// WithUnless is r with the exception u; only a live rule takes one, with
// Then or ThenDefault, not both.
func (r Rule) WithUnless(u Unless) (Rule, error) {
	if r.Policy != PolicyLive {
		return r, fmt.Errorf("only a live rule takes unless, not a %s rule", r.Policy)
	}
	if (u.Then == nil) == !u.ThenDefault {
		return r, fmt.Errorf("unless takes then (the value instead) or thenDefault: true (the new chart's default), one of the two")
	}
	if u.Equals == nil {
		return r, fmt.Errorf("unless needs equals: the live value it replaces")
	}
	u.Equals, u.Then = normalize(u.Equals), normalize(u.Then)
	r.Unless = &u
	return r, nil
}

// NewRule checks that the parts of a rule fit together: live and once need a
// concrete path, a source and an expression; other policies take neither.
func NewRule(pattern Pattern, policy Policy, source *ObjectRef, expr *Expr) (Rule, error) {
	r := Rule{Pattern: pattern, Policy: policy, Source: source, Expr: expr}
	if policy.needsSource() {
		if !pattern.Concrete() {
			return r, fmt.Errorf("policy %s needs a concrete path, not the pattern %q", policy, pattern)
		}
		if source == nil {
			return r, fmt.Errorf("policy %s needs a source object", policy)
		}
		if source.APIVersion == "" || source.Kind == "" || source.Name == "" {
			return r, fmt.Errorf("policy %s: source needs apiVersion, kind and name", policy)
		}
		if expr == nil {
			return r, fmt.Errorf("policy %s needs an expr", policy)
		}
		return r, nil
	}
	if source != nil {
		return r, fmt.Errorf("policy %s takes no source (only live and once do)", policy)
	}
	if expr != nil {
		return r, fmt.Errorf("policy %s takes no expr (only live and once do)", policy)
	}
	return r, nil
}

// Migration is a yq expression applied to the user values when the upgrade's
// from and to versions satisfy its constraints (an empty constraint always
// does).
type Migration struct {
	Name string
	From *semver.Constraints
	To   *semver.Constraints
	Expr *Expr

	fromText, toText string
}

// NewMigration builds a migration; from and to are semver constraints such as
// "<1.1.0" and may be empty.
func NewMigration(name, from, to string, expr *Expr) (Migration, error) {
	m := Migration{Name: name, Expr: expr, fromText: from, toText: to}
	var err error
	if m.From, err = ParseConstraint(from); err != nil {
		return m, fmt.Errorf("from: %w", err)
	}
	if m.To, err = ParseConstraint(to); err != nil {
		return m, fmt.Errorf("to: %w", err)
	}
	if expr == nil {
		return m, fmt.Errorf("expr: a migration needs an expression")
	}
	return m, nil
}

// ParseConstraint parses a semver constraint; "" gives nil (matches all).
func ParseConstraint(s string) (*semver.Constraints, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	c, err := semver.NewConstraint(s)
	if err != nil {
		return nil, fmt.Errorf("bad version constraint %q: %w", s, err)
	}
	// upgrades run from and to release candidates too: "<2.0.0" matches
	// 1.9.9-rc.1
	c.IncludePrerelease = true
	return c, nil
}

// Applies reports whether the migration runs for this version transition.
// A version that is not semver satisfies no constraint.
func (m Migration) Applies(from, to *semver.Version) bool {
	return satisfies(m.From, from) && satisfies(m.To, to)
}

func satisfies(c *semver.Constraints, v *semver.Version) bool {
	if c == nil {
		return true
	}
	return v != nil && c.Check(v)
}
