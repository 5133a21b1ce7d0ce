package health

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Gate is one health gate of a chart entry (wait.health[i]).
type Gate struct {
	APIVersion, Kind string
	// Namespace and Selector choose the objects outside the release (an
	// operator's); both empty: the objects of the kind the release
	// renders. A selector with no namespace reads the release's.
	Namespace string
	Selector  labels.Selector
	// MinCount is how many objects must exist (each current), or, with
	// Each, how many current ones each group needs; the parser sets 1 when
	// the spec gives none.
	MinCount int
	// Filter, when set, chooses which of the objects count: those it is
	// false of are neither current nor counted (admission's
	// matchConditions are the model).
	Filter *Expr
	// Each, when set, groups the counted objects: one group per object of
	// another kind, each needing MinCount current objects.
	Each *Each
	// Current must hold of each object; InProgress and Failed are
	// optional (nil).
	Current, InProgress, Failed *Expr
	// At says where the spec declares it, for errors: "spec.yaml:14:
	// charts[1].wait.health[2]".
	At string
}

// Each is a gate's groups: one per object of its kind (in Namespace, that
// Selector selects), named by its name; Key, evaluated on each object of
// the gate, names the group the object is counted in.
type Each struct {
	APIVersion, Kind string
	Namespace        string
	Selector         labels.Selector
	Key              *Expr
}

// GroupVersionKind is the groups' kind.
func (e Each) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(e.APIVersion, e.Kind)
}

// String names the groups for people: "each Node longhorn.io/v1beta2 in
// longhorn-system".
func (e Each) String() string {
	s := "each " + e.Kind + " " + e.APIVersion
	if e.Namespace != "" {
		s += " in " + e.Namespace
	}
	if e.Selector != nil && !e.Selector.Empty() {
		s += " (" + e.Selector.String() + ")"
	}
	return s
}

// GroupVersionKind is the gate's kind.
func (g Gate) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(g.APIVersion, g.Kind)
}

// Rendered reports whether the gate reads the objects the release renders
// (no namespace, no selector).
func (g Gate) Rendered() bool { return g.Namespace == "" && (g.Selector == nil || g.Selector.Empty()) }

// String names the gate for people: "KubeVirt kubevirt.io/v1 (the
// release's)", "InstanceManager longhorn.io/v1beta2 in longhorn-system
// (longhorn.io/instance-manager-type=aio)".
func (g Gate) String() string {
	s := g.Kind + " " + g.APIVersion
	if g.Rendered() {
		return s + " (the release's)"
	}
	if g.Namespace != "" {
		s += " in " + g.Namespace
	}
	if g.Selector != nil && !g.Selector.Empty() {
		s += " (" + g.Selector.String() + ")"
	}
	if g.Each != nil {
		s += ", " + g.Each.String()
	}
	return s
}

// ParseSelector parses a label selector as kubectl -l takes it.
func ParseSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("bad label selector %q: %w", s, err)
	}
	return sel, nil
}
