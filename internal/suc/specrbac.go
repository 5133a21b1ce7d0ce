package suc

import (
	"slices"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// SpecReads are the reads an upgrade spec's own settings make, beside
// the chart's objects: each as a rule in a namespace ("": cluster-wide).
type SpecReads map[string][]rbacv1.PolicyRule

// add adds rule in ns, merging the verbs and names of an equal rule.
func (r SpecReads) add(ns string, rule rbacv1.PolicyRule) {
	for i, have := range r[ns] {
		if slices.Equal(have.APIGroups, rule.APIGroups) && slices.Equal(have.Resources, rule.Resources) &&
			(len(have.ResourceNames) == 0) == (len(rule.ResourceNames) == 0) {
			have.Verbs = union(have.Verbs, rule.Verbs)
			have.ResourceNames = union(have.ResourceNames, rule.ResourceNames)
			r[ns][i] = have
			return
		}
	}
	rule.Verbs = union(nil, rule.Verbs)
	rule.ResourceNames = union(nil, rule.ResourceNames)
	r[ns] = append(r[ns], rule)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// GateReads adds the reads of health gates: list and watch on each gate's
// kind in the namespace it reads (a gate that selects: its namespace,
// else the release's; a gate on the release's objects: each namespace of
// rendered that holds objects of its kind, else the release's), and on
// the release's revisions (Secrets in the release's namespace) for a gate
// on the release's objects. scope says a kind's resource and whether it
// is namespaced.
func (r SpecReads) GateReads(gates []health.Gate, rendered []*unstructured.Unstructured, releaseNamespace string, scope func(schema.GroupVersionKind) (string, bool)) {
	listWatch := []string{"list", "watch"}
	for _, g := range gates {
		gvk := g.GroupVersionKind()
		resource, namespaced := scope(gvk)
		rule := rbacv1.PolicyRule{APIGroups: []string{gvk.Group}, Resources: []string{resource}, Verbs: listWatch}
		var namespaces []string
		switch {
		case !namespaced:
			namespaces = []string{""}
		case g.Namespace != "":
			namespaces = []string{g.Namespace}
		case !g.Rendered():
			namespaces = []string{releaseNamespace}
		default:
			for _, o := range rendered {
				if o.GroupVersionKind().GroupKind() != gvk.GroupKind() {
					continue
				}
				ns := o.GetNamespace()
				if ns == "" {
					ns = releaseNamespace
				}
				if !slices.Contains(namespaces, ns) {
					namespaces = append(namespaces, ns)
				}
			}
			if len(namespaces) == 0 {
				namespaces = []string{releaseNamespace}
			}
		}
		for _, ns := range namespaces {
			r.add(ns, rule)
		}
		if g.Rendered() {
			r.add(releaseNamespace, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: listWatch})
		}
		if g.Each != nil {
			egvk := g.Each.GroupVersionKind()
			eres, enamespaced := scope(egvk)
			ns := releaseNamespace
			switch {
			case !enamespaced:
				ns = ""
			case g.Each.Namespace != "":
				ns = g.Each.Namespace
			}
			r.add(ns, rbacv1.PolicyRule{APIGroups: []string{egvk.Group}, Resources: []string{eres}, Verbs: listWatch})
		}
	}
}

// RuleReads adds the reads of the spec's live and once rules: get on
// each source object by name, in its namespace (a cluster-scoped one
// cluster-wide).
func (r SpecReads) RuleReads(rules []values.Rule, scope func(schema.GroupVersionKind) (string, bool)) {
	for _, rule := range rules {
		if rule.Source == nil {
			continue
		}
		gvk := schema.FromAPIVersionAndKind(rule.Source.APIVersion, rule.Source.Kind)
		resource, namespaced := scope(gvk)
		ns := ""
		if namespaced {
			ns = rule.Source.Namespace
		}
		r.add(ns, rbacv1.PolicyRule{APIGroups: []string{gvk.Group}, Resources: []string{resource}, ResourceNames: []string{rule.Source.Name}, Verbs: []string{"get"}})
	}
}

// Scope is how CheckRBAC finds a kind's resource and scope: the chart's
// CRDs, then the cluster's discovery (mapper, nil: none), then
// Kubernetes' own cluster-scoped kinds, else namespaced with its resource
// guessed from its name.
func Scope(crds []*unstructured.Unstructured, mapper meta.RESTMapper) func(schema.GroupVersionKind) (string, bool) {
	return func(gvk schema.GroupVersionKind) (string, bool) {
		for _, c := range crds {
			group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind")
			if c.GetKind() == "CustomResourceDefinition" && group == gvk.Group && kind == gvk.Kind {
				plural, _, _ := unstructured.NestedString(c.Object, "spec", "names", "plural")
				sc, _, _ := unstructured.NestedString(c.Object, "spec", "scope")
				return plural, sc != "Cluster"
			}
		}
		if mapper != nil {
			if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				return m.Resource.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace
			}
		}
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		return plural.Resource, !clusterScoped[gvk.Group+"/"+gvk.Kind]
	}
}

// PullRead is what preflight's image check reads to pull as a pod does,
// and the wait to see the pod start: its namespace, the kind of the
// chart's object that makes it, its ServiceAccount and the pull secrets
// it names (its own and those of a ServiceAccount the chart renders).
type PullRead struct {
	Namespace, Kind, ServiceAccount string
	Secrets                         []string
}

// PullReads are the reads of the image check and of the wait's pods: get
// on each pod's ServiceAccount and pull secrets, by name; list and watch
// on the pods of each namespace the chart makes pods in, and there on
// what says which pods are of a workload's current revision: the
// deployments and replicasets where a Deployment makes them, the
// statefulsets where a StatefulSet, the daemonsets where a DaemonSet.
func PullReads(pulls []PullRead) SpecReads {
	r := SpecReads{}
	for _, p := range pulls {
		if p.ServiceAccount != "" {
			r.add(p.Namespace, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{p.ServiceAccount}, Verbs: []string{"get"}})
		}
		if len(p.Secrets) > 0 {
			r.add(p.Namespace, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: p.Secrets, Verbs: []string{"get"}})
		}
		r.add(p.Namespace, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}})
		for _, resource := range revisionReads[p.Kind] {
			r.add(p.Namespace, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{resource}, Verbs: []string{"list", "watch"}})
		}
	}
	return r
}

// revisionReads are the resources the wait's pods watch (internal/pods)
// lists and watches where a workload of each kind makes pods.
var revisionReads = map[string][]string{
	"Deployment":  {"deployments", "replicasets"},
	"StatefulSet": {"statefulsets"},
	"DaemonSet":   {"daemonsets"},
}
