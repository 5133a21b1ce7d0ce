package fleetsim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// rendered is one object of a deployment as Helm rendered it.
type rendered struct {
	key resourceKey
	obj map[string]any
}

// renderedObjects parses a release manifest into its objects, in the
// release namespace unless they name one.
func renderedObjects(manifest, namespace string) []rendered {
	var out []rendered
	for _, doc := range strings.Split(manifest, "\n---") {
		var obj map[string]any
		if err := yamlUnmarshal([]byte(doc), &obj); err != nil || obj == nil {
			continue
		}
		u := unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" {
			continue
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = namespace
		}
		out = append(out, rendered{key: resourceKey{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: ns, Name: u.GetName()}, obj: obj})
	}
	return out
}

// resource returns the dynamic client of object k, cluster-scoped or not
// as the API server says.
func (s *Sim) resource(k resourceKey) (dynamic.ResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(k.APIVersion)
	if err != nil {
		return nil, false, err
	}
	mapper, err := s.helm.getter.For("").ToRESTMapper()
	if err != nil {
		return nil, false, err
	}
	m, err := mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: k.Kind}, gv.Version)
	if err != nil {
		return nil, false, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return s.client.Resource(m.Resource).Namespace(k.Namespace), true, nil
	}
	return s.client.Resource(m.Resource), false, nil
}

// driftOf compares the live objects of deployment a with what Helm
// rendered, as Fleet's agent does: a field the chart sets that the live
// object has with another value, or lacks, is drift, unless a
// comparePatches entry of the BundleDeployment removes that path. Each
// drifted object comes with a JSON merge patch that would restore it; a
// missing object is drift too.
func (s *Sim) driftOf(ctx context.Context, a applied, comparePatches []any) ([]Resource, error) {
	var out []Resource
	for _, r := range a.objects {
		res, namespaced, err := s.resource(r.key)
		if err != nil {
			return nil, fmt.Errorf("mapping %s %s: %w", r.key.APIVersion, r.key.Kind, err)
		}
		key := r.key
		if !namespaced {
			key.Namespace = ""
		}
		live, err := res.Get(ctx, key.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				out = append(out, Resource{APIVersion: key.APIVersion, Kind: key.Kind, Namespace: key.Namespace, Name: key.Name, Missing: true})
				continue
			}
			return nil, fmt.Errorf("reading %s %s/%s: %w", key.Kind, key.Namespace, key.Name, err)
		}
		desired, current := normalize(r.obj), normalize(live.Object)
		for _, p := range comparePatches {
			pm, _ := p.(map[string]any)
			if !patchMatches(pm, key) {
				continue
			}
			for _, ptr := range ignoredPointers(pm) {
				removePointer(desired, ptr)
				removePointer(current, ptr)
			}
		}
		meta, _ := desired["metadata"].(map[string]any)
		for _, k := range []string{"name", "namespace"} {
			delete(meta, k) // identity, not content
		}
		if patch, differs := mergePatch(desired, current); differs {
			b, err := json.Marshal(patch)
			if err != nil {
				return nil, err
			}
			out = append(out, Resource{APIVersion: key.APIVersion, Kind: key.Kind, Namespace: key.Namespace, Name: key.Name, Patch: string(b)})
		}
	}
	return out, nil
}

// mergePatch is the JSON merge patch that sets every field desired sets
// to its value in live, and whether there is any.
//
// A field the API server defaulted in the live object (a container's
// imagePullPolicy) is no drift: only what desired sets is compared, in
// maps and in the maps of a list of the same length, as Fleet compares
// the desired objects with the live ones. A list that differs is patched
// whole, as a merge patch replaces lists.
func mergePatch(desired, live any) (any, bool) {
	if dl, ok := desired.([]any); ok {
		if ll, ok := live.([]any); ok && len(dl) == len(ll) {
			for i := range dl {
				if _, differs := mergePatch(dl[i], ll[i]); differs {
					return desired, true
				}
			}
			return nil, false
		}
	}
	dm, ok := desired.(map[string]any)
	lm, lok := live.(map[string]any)
	if !ok || !lok {
		if equality.Semantic.DeepEqual(desired, live) {
			return nil, false
		}
		return desired, true
	}
	patch := map[string]any{}
	for k, dv := range dm {
		if p, differs := mergePatch(dv, lm[k]); differs {
			patch[k] = p
		}
	}
	return patch, len(patch) > 0
}

// normalize is obj as plain JSON values (numbers float64), a deep copy.
func normalize(obj map[string]any) map[string]any {
	b, _ := json.Marshal(obj)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// patchMatches says whether comparePatches entry p is about object k.
func patchMatches(p map[string]any, k resourceKey) bool {
	str := func(f string) string { v, _ := p[f].(string); return v }
	return str("apiVersion") == k.APIVersion && str("kind") == k.Kind && str("name") == k.Name &&
		(str("namespace") == "" || str("namespace") == k.Namespace)
}

// ignoredPointers are the JSON pointers a comparePatches entry leaves out
// of the comparison: its jsonPointers and the paths of its remove
// operations.
func ignoredPointers(p map[string]any) []string {
	var out []string
	ptrs, _ := p["jsonPointers"].([]any)
	for _, v := range ptrs {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	ops, _ := p["operations"].([]any)
	for _, v := range ops {
		op, _ := v.(map[string]any)
		if op["op"] == "remove" {
			if s, ok := op["path"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// removePointer removes the field JSON pointer ptr names from obj, if any.
func removePointer(obj map[string]any, ptr string) {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	cur := obj
	for i, p := range parts {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		if i == len(parts)-1 {
			delete(cur, p)
			return
		}
		next, ok := cur[p].(map[string]any)
		if !ok {
			return
		}
		cur = next
	}
}

// comparePatchesOf are the BundleDeployment's diff.comparePatches.
func comparePatchesOf(bd *unstructured.Unstructured) []any {
	p, _, _ := unstructured.NestedSlice(bd.Object, "spec", "options", "diff", "comparePatches")
	return p
}

// watchDrift watches the objects of deployment a of BundleDeployment k
// until ctx ends: a change of one makes the agent check for drift
// Options.DriftDelay later, as Fleet's agent does after its trigger's
// sleep.
func (s *Sim) watchDrift(ctx context.Context, k string, a applied) {
	for _, r := range a.objects {
		res, _, err := s.resource(r.key)
		if err != nil {
			s.log.Info("not watching for drift", "object", r.key, "err", err)
			continue
		}
		sel := fields.OneTermEqualSelector("metadata.name", r.key.Name).String()
		go func() {
			for ctx.Err() == nil {
				list, err := res.List(ctx, metav1.ListOptions{FieldSelector: sel})
				if err == nil {
					var w watch.Interface
					if w, err = res.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()}); err == nil {
						for range w.ResultChan() {
							s.agentQueue.AddAfter(k, s.opts.DriftDelay)
						}
						w.Stop()
						continue
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
}

// startDriftWatch replaces the drift watch of BundleDeployment k with one
// of deployment a (none when a has no objects: not on this cluster, or
// deployed before this simulator ran).
func (s *Sim) startDriftWatch(ctx context.Context, k string, a applied) {
	s.mu.Lock()
	if stop := s.driftStops[k]; stop != nil {
		stop()
		delete(s.driftStops, k)
	}
	if len(a.objects) == 0 {
		s.mu.Unlock()
		return
	}
	wctx, stop := context.WithCancel(ctx)
	s.driftStops[k] = stop
	s.mu.Unlock()
	s.watchDrift(wctx, k, a)
}
