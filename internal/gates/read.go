package gates

import (
	"context"
	"fmt"

	release "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Read reads each gate's objects once, for want: a gate that selects, one
// list of its kind in its namespace; a gate on the release's objects, the
// newest revision of the release (which must be at want's version) and
// one list of its kind in each namespace that revision puts it in.
func (p *Port) Read(ctx context.Context, o *upgrade.Observed, want upgrade.Want) ([]health.Seen, error) {
	rel, err := p.release(ctx, o)
	if err != nil {
		return nil, err
	}
	out := make([]health.Seen, len(p.Gates))
	var newest *release.Release
	newestRead := false
	for i, g := range p.Gates {
		sc, err := p.resolve(g)
		if meta.IsNoMatchError(err) {
			out[i] = health.Seen{Waiting: notServed(g)}
			continue
		}
		if err != nil {
			return nil, err
		}
		if g.Each != nil {
			esc, ns, err := p.each(g, rel)
			if meta.IsNoMatchError(err) {
				out[i] = health.Seen{Waiting: fmt.Sprintf("the cluster does not serve %s %s yet", g.Each.Kind, g.Each.APIVersion)}
				continue
			}
			if err != nil {
				return nil, err
			}
			if out[i].Groups, err = p.list(ctx, esc.gvr, ns, g.Each.Selector); err != nil {
				return nil, err
			}
		}
		if !g.Rendered() {
			objs, err := p.list(ctx, sc.gvr, namespaceOf(g, sc, rel), g.Selector)
			if err != nil {
				return nil, err
			}
			out[i].Objects = objs
			continue
		}
		if !newestRead {
			if newest, err = p.Releases.Newest(rel.Namespace, rel.Name, rel.Driver); err != nil {
				return nil, fmt.Errorf("reading helm release %s/%s: %w", rel.Namespace, rel.Name, err)
			}
			newestRead = true
		}
		wanted, waiting, err := revisionObjects(g, newest, rel, want.Version, sc.namespaced)
		if err != nil || waiting != "" {
			out[i] = health.Seen{Waiting: waiting}
			if err != nil {
				return nil, err
			}
			continue
		}
		var live []map[string]any
		for _, ns := range namespaces(wanted) {
			objs, err := p.list(ctx, sc.gvr, ns, nil)
			if err != nil {
				return nil, err
			}
			live = append(live, objs...)
		}
		m := match(g.Kind, wanted, live)
		m.Groups = out[i].Groups
		out[i] = m
	}
	return out, nil
}

// list lists the objects of gvr in ns ("": every namespace, or a
// cluster-scoped kind) that sel selects (nil: all); a refusal names the
// rule to add.
func (p *Port) list(ctx context.Context, gvr schema.GroupVersionResource, ns string, sel labels.Selector) ([]map[string]any, error) {
	opts := metav1.ListOptions{}
	if sel != nil {
		opts.LabelSelector = sel.String()
	}
	l, err := p.Dynamic.Resource(gvr).Namespace(ns).List(ctx, opts)
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("reading the objects of a health gate: %w: %s", err, listRule(gvr, ns))
	}
	if err != nil {
		return nil, fmt.Errorf("reading the objects of a health gate: %w", err)
	}
	out := make([]map[string]any, len(l.Items))
	for i := range l.Items {
		out[i] = l.Items[i].Object
	}
	return out, nil
}

// notServed is a gate's wait while its kind is not served (a CRD of this
// upgrade not applied yet).
func notServed(g health.Gate) string {
	return fmt.Sprintf("the cluster does not serve %s %s yet", g.Kind, g.APIVersion)
}

// revisionObjects are the objects of g's kind the newest revision of the
// release holds, or why they are not known yet: no revision, or one of
// another chart version than version.
func revisionObjects(g health.Gate, newest *release.Release, rel Release, version string, namespaced bool) ([]*unstructured.Unstructured, string, error) {
	if newest == nil {
		return nil, fmt.Sprintf("no helm release %s/%s on this cluster yet", rel.Namespace, rel.Name), nil
	}
	if v := helmrelease.ChartVersion(newest); v != version {
		return nil, fmt.Sprintf("helm release %s/%s is at revision %d of chart version %s, not %s yet", rel.Namespace, rel.Name, newest.Version, v, version), nil
	}
	objs, err := rendered(g, newest.Manifest, rel, namespaced)
	if err != nil {
		return nil, "", fmt.Errorf("reading the manifest of helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, newest.Version, err)
	}
	return objs, "", nil
}

// match is what was seen of the wanted objects among live ones.
func match(kind string, wanted []*unstructured.Unstructured, live []map[string]any) health.Seen {
	byName := map[string]map[string]any{}
	for _, o := range live {
		u := unstructured.Unstructured{Object: o}
		byName[u.GetNamespace()+"/"+u.GetName()] = o
	}
	var s health.Seen
	for _, w := range wanted {
		if o, ok := byName[w.GetNamespace()+"/"+w.GetName()]; ok {
			s.Objects = append(s.Objects, o)
		} else {
			s.Missing = append(s.Missing, name(kind, w))
		}
	}
	return s
}
