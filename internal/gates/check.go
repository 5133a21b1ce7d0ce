package gates

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// secrets are where Helm keeps a release's revisions (the default
// driver): a gate on the release's objects watches them to learn which
// objects the newest revision holds.
var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Check says, before any write, what makes a gate unusable here. Bad
// input (exit 2): the target's release is not on this cluster; a kind the
// cluster does not serve, unless a CRD the upgrade applies (c.CRDs)
// defines it; a namespace on a cluster-scoped kind; a gate on the
// release's objects of a kind c's chart does not render; an each that
// selects no object (checkGroups). A refusal (exit 3): a list or watch
// the gates need and this process may not make, with the rule to add.
func (p *Port) Check(ctx context.Context, o *upgrade.Observed, c upgrade.Change) error {
	if len(p.Gates) == 0 {
		return nil
	}
	rel, err := p.release(ctx, o)
	if errors.Is(err, outcome.ErrBadInput) {
		return fmt.Errorf("%s: a health gate reads this cluster: %w", p.Gates[0].At, err)
	}
	if err != nil {
		return err
	}
	// render is c's chart rendered as the release, once; "" without a
	// chart (the change renders nothing)
	var text string
	var rendered1 bool
	render := func() (string, error) {
		if rendered1 || c.Chart == nil || c.Chart.Manifest == nil {
			return text, nil
		}
		t, err := c.Chart.Manifest(c.Values, rel.Name, rel.Namespace)
		if err != nil {
			return "", err
		}
		text, rendered1 = t, true
		return text, nil
	}
	var missing []string // rules to add
	need := func(gvr schema.GroupVersionResource, ns string) error {
		ok, err := p.Access.May(ctx, gvr, ns, "list", "watch")
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, listRule(gvr, ns))
		}
		return nil
	}
	for _, g := range p.Gates {
		sc, err := p.resolve(g)
		if meta.IsNoMatchError(err) {
			crd, ok := definedBy(c.CRDs, g)
			if !ok {
				return outcome.BadInput(fmt.Errorf("%s: the cluster does not serve %s %s%s, and no CRD this upgrade applies defines it",
					g.At, g.Kind, g.APIVersion, p.served(g)))
			}
			sc, err = crd, nil
		}
		if err != nil {
			return fmt.Errorf("%s: mapping %s %s to its resource: %w", g.At, g.Kind, g.APIVersion, err)
		}
		if !sc.namespaced && g.Namespace != "" {
			return outcome.BadInput(fmt.Errorf("%s: %s is cluster-scoped: a gate on it takes no namespace", g.At, g.Kind))
		}
		if g.Each != nil {
			esc, ns, err := p.each(g, rel)
			if meta.IsNoMatchError(err) {
				return outcome.BadInput(fmt.Errorf("%s: each: the cluster does not serve %s %s", g.At, g.Each.Kind, g.Each.APIVersion))
			}
			if err != nil {
				return fmt.Errorf("%s: mapping %s %s to its resource: %w", g.At, g.Each.Kind, g.Each.APIVersion, err)
			}
			if !esc.namespaced && g.Each.Namespace != "" {
				return outcome.BadInput(fmt.Errorf("%s: each: %s is cluster-scoped: it takes no namespace", g.At, g.Each.Kind))
			}
			if err := need(esc.gvr, ns); err != nil {
				return err
			}
		}
		if !g.Rendered() {
			if err := need(sc.gvr, namespaceOf(g, sc, rel)); err != nil {
				return err
			}
			continue
		}
		if c.Chart == nil || c.Chart.Manifest == nil {
			return fmt.Errorf("%s: no chart to render for the gates", g.At)
		}
		m, err := render()
		if err != nil {
			return err
		}
		objs, err := rendered(g, m, rel, sc.namespaced)
		if err != nil {
			return fmt.Errorf("reading the chart's manifest: %w", err)
		}
		if len(objs) == 0 {
			return outcome.BadInput(fmt.Errorf("%s: the chart renders no %s (%s) as release %s/%s: a gate on objects an operator makes needs a namespace or a selector",
				g.At, g.Kind, g.GroupVersionKind().Group, rel.Namespace, rel.Name))
		}
		for _, ns := range namespaces(objs) {
			if err := need(sc.gvr, ns); err != nil {
				return err
			}
		}
		if err := need(secrets, rel.Namespace); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return outcome.Refused(fmt.Errorf("the health gates need reads this process may not make: %s", joinUnique(missing)))
	}
	for _, g := range p.Gates {
		if g.Each == nil {
			continue
		}
		if err := p.checkGroups(ctx, g, rel, render); err != nil {
			return err
		}
	}
	return p.probe(ctx, o, c)
}

// checkGroups refuses gate g, which has an each, when its each selects no
// object (bad input): none of its kind in its namespace that its selector
// selects exists on the cluster (one list, of one object), nor is one
// among the objects of the chart rendered as the release (render), which
// the apply creates: a gate grouped by objects the chart renders is not
// refused before they exist. A gate with no group would wait for nothing
// (a mistyped namespace: Harvester's gate on its instance managers, one
// per Longhorn Node, would never wait).
func (p *Port) checkGroups(ctx context.Context, g health.Gate, rel Release, render func() (string, error)) error {
	esc, ns, err := p.each(g, rel)
	if err != nil {
		return fmt.Errorf("%s: mapping %s %s to its resource: %w", g.At, g.Each.Kind, g.Each.APIVersion, err)
	}
	opts := metav1.ListOptions{Limit: 1}
	if g.Each.Selector != nil {
		opts.LabelSelector = g.Each.Selector.String()
	}
	l, err := p.Dynamic.Resource(esc.gvr).Namespace(ns).List(ctx, opts)
	if err != nil {
		return fmt.Errorf("%s: each: reading %s in %s: %w", g.At, esc.gvr.Resource, where(ns), err)
	}
	if len(l.Items) > 0 {
		return nil
	}
	text, err := render()
	if err != nil {
		return err
	}
	objs, err := renderedKind(g.Each.GroupVersionKind().GroupKind(), text, rel, esc.namespaced)
	if err != nil {
		return fmt.Errorf("reading the chart's manifest: %w", err)
	}
	if selectsAny(*g.Each, ns, objs) {
		return nil
	}
	return noGroups(g, ns)
}

// selectsAny reports whether e, read in ns ("": cluster-wide), selects
// one of objs (objects of its kind, their namespaces set).
func selectsAny(e health.Each, ns string, objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if ns != "" && o.GetNamespace() != ns {
			continue
		}
		if e.Selector == nil || e.Selector.Matches(labels.Set(o.GetLabels())) {
			return true
		}
	}
	return false
}

// noGroups is the refusal of gate g whose each, read in ns, selects no
// object: it names the gate, the kind, the namespace (and that it is the
// release's when the each names none) and the selector.
func noGroups(g health.Gate, ns string) error {
	what := fmt.Sprintf("%s %s in %s", g.Each.Kind, g.Each.APIVersion, where(ns))
	if ns != "" && g.Each.Namespace == "" {
		what += " (the release's: each names no namespace)"
	}
	if g.Each.Selector != nil && !g.Each.Selector.Empty() {
		what += fmt.Sprintf(" with labels %s", g.Each.Selector)
	}
	return outcome.BadInput(fmt.Errorf("%s: each selects no object: no %s exists, and the chart renders none: the gate would have no group to wait for",
		g.At, what))
}

// probe evaluates each gate's expressions on its objects as they are now
// (those of the deployed revision, or the operator's), as the wait will:
// one that gives a value of the wrong type (a bool's place, a group
// key's), or a filter that cannot be evaluated on one (health.Probe), is
// bad input naming the gate and the expression.
func (p *Port) probe(ctx context.Context, o *upgrade.Observed, c upgrade.Change) error {
	seen, err := p.Read(ctx, o, upgrade.Want{Version: o.Version})
	if err != nil {
		return err
	}
	vars := health.Vars{Values: c.Values}
	if c.Chart != nil {
		vars = health.Vars{Values: values.Overlay(c.Chart.Defaults, c.Values), Version: c.Chart.Version}
	}
	for i, g := range p.Gates {
		if err := health.Probe(g, seen[i], vars); err != nil {
			return outcome.BadInput(err)
		}
	}
	return nil
}

// listRule is the RBAC rule that lets this process list and watch gvr
// in ns ("": cluster-wide), in the words of a Role or ClusterRole.
func listRule(gvr schema.GroupVersionResource, ns string) string {
	where := "a ClusterRole"
	if ns != "" {
		where = "a Role in namespace " + ns
	}
	return fmt.Sprintf(`add to %s the rule {apiGroups: [%q], resources: [%s], verbs: [list, watch]}`, where, gvr.Group, gvr.Resource)
}

// definedBy finds, among the CRDs an upgrade applies, the one that
// serves g's kind at g's version.
func definedBy(crds []map[string]any, g health.Gate) (scope, bool) {
	gvk := g.GroupVersionKind()
	for _, crd := range crds {
		u := unstructured.Unstructured{Object: crd}
		group, _, _ := unstructured.NestedString(crd, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(crd, "spec", "names", "plural")
		sc, _, _ := unstructured.NestedString(crd, "spec", "scope")
		if u.GetKind() != "CustomResourceDefinition" || group != gvk.Group || kind != gvk.Kind {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if vm["name"] == gvk.Version && vm["served"] == true {
				return scope{gvr: gvk.GroupVersion().WithResource(plural), namespaced: sc == "Namespaced"}, true
			}
		}
	}
	return scope{}, false
}

// namespaces are the namespaces objs are in, sorted, each once.
func namespaces(objs []*unstructured.Unstructured) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range objs {
		if !seen[o.GetNamespace()] {
			seen[o.GetNamespace()] = true
			out = append(out, o.GetNamespace())
		}
	}
	sort.Strings(out)
	return out
}

func joinUnique(lines []string) string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}
