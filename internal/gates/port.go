// Package gates reads and watches, on the cluster, the objects of an
// upgrade spec's health gates (wait.health; package health judges them):
// the objects of a kind the target's Helm release renders, or those an
// operator made, chosen by namespace and label selector. It is the
// upgrade.Gates port. Every read is a list (or an informer: one list,
// then one watch) of the gate's kind in one namespace, which is what
// `plan --check-chart` grants (list and watch there); nothing is polled.
package gates

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Release is where a target's chart is deployed on this cluster, as Helm
// stores it.
type Release struct {
	Namespace, Name, Driver string
}

// Released is a target whose chart is a Helm release on this cluster
// (every kind: a ManagedChart's on the local cluster). Adapters implement
// it without importing it.
type Released interface {
	// HelmRelease says where the release of the target as o shows it is;
	// an error marked outcome.ErrBadInput says why the gates cannot read
	// it here (a ManagedChart whose Bundle targets other clusters only).
	HelmRelease(ctx context.Context, o *upgrade.Observed) (namespace, name, driver string, err error)
}

// Port is the upgrade.Gates of a job's gates on one target.
type Port struct {
	Dynamic  dynamic.Interface
	Mapper   meta.RESTMapper
	Releases *helmrelease.Client
	Access   *liveobjects.SelfAccess
	Log      *slog.Logger
	Gates    []health.Gate
	Target   Released
}

var _ upgrade.Gates = (*Port)(nil)

// release is the target's release as o shows it.
func (p *Port) release(ctx context.Context, o *upgrade.Observed) (Release, error) {
	if o == nil {
		return Release{}, fmt.Errorf("the target does not exist")
	}
	ns, name, driver, err := p.Target.HelmRelease(ctx, o)
	return Release{Namespace: ns, Name: name, Driver: driver}, err
}

// scope is how a gate's kind is served: its resource, and whether it is
// namespaced.
type scope struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// resolve maps a gate's kind to its resource at the gate's version; a
// meta.NoKindMatchError when the cluster does not serve it.
func (p *Port) resolve(g health.Gate) (scope, error) {
	gvk := g.GroupVersionKind()
	m, err := p.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return scope{}, err
	}
	return scope{gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

// each maps the kind of g's groups to its resource, and the namespace
// they are read in (their own, else the release's; "" cluster-wide).
func (p *Port) each(g health.Gate, rel Release) (scope, string, error) {
	gvk := g.Each.GroupVersionKind()
	m, err := p.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return scope{}, "", err
	}
	sc := scope{gvr: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
	switch {
	case !sc.namespaced:
		return sc, "", nil
	case g.Each.Namespace != "":
		return sc, g.Each.Namespace, nil
	}
	return sc, rel.Namespace, nil
}

// served names the versions of g's kind the cluster serves, for a
// refusal: " (served: example.com/v1beta1)", or "".
func (p *Port) served(g health.Gate) string {
	ms, err := p.Mapper.RESTMappings(g.GroupVersionKind().GroupKind())
	if err != nil || len(ms) == 0 {
		return ""
	}
	var vs []string
	for _, m := range ms {
		vs = append(vs, m.GroupVersionKind.GroupVersion().String())
	}
	return " (served: " + strings.Join(vs, ", ") + ")"
}

// rendered are the objects of g's kind in a release manifest, each with
// its namespace set (the release's, for a namespaced kind that names
// none).
func rendered(g health.Gate, text string, rel Release, namespaced bool) ([]*unstructured.Unstructured, error) {
	return renderedKind(g.GroupVersionKind().GroupKind(), text, rel, namespaced)
}

// renderedKind are the objects of kind gk in a release manifest, each
// with its namespace set as rendered sets it.
func renderedKind(gk schema.GroupKind, text string, rel Release, namespaced bool) ([]*unstructured.Unstructured, error) {
	objs, err := manifest.Objects(text)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != gk {
			continue
		}
		switch {
		case !namespaced:
			o.SetNamespace("")
		case o.GetNamespace() == "":
			o.SetNamespace(rel.Namespace)
		}
		out = append(out, o)
	}
	return out, nil
}

// namespaceOf is where a gate that selects reads: its namespace, else the
// release's; "" for a cluster-scoped kind.
func namespaceOf(g health.Gate, sc scope, rel Release) string {
	switch {
	case !sc.namespaced:
		return ""
	case g.Namespace != "":
		return g.Namespace
	}
	return rel.Namespace
}

// name is Kind namespace/name.
func name(kind string, u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return kind + " " + u.GetName()
	}
	return kind + " " + u.GetNamespace() + "/" + u.GetName()
}
