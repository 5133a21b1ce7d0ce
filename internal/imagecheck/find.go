package imagecheck

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file finds the images an upgrade runs: every container and init
// container of every pod template the new revision renders, hooks
// included, and the images its values name for operators to run (declared
// in the spec, or found by their shape).

// Use is one place an image is used.
type Use struct {
	// Where names it for people: "Deployment demo/web, container web",
	// "Job demo/migrate (a hook), init container wait", "values
	// longhorn.image.longhorn.instanceManager (images.values[1])".
	Where string
	// Image is the reference as written.
	Image string
	// Namespace, ServiceAccount and PullSecrets are where and with what
	// the kubelet pulls it (a pod's), Kind the kind of the object that
	// makes the pod; empty for a value.
	Namespace, ServiceAccount, Kind string
	PullSecrets                     []string
	// Pod is the pod's spec, for the nodes it may run on (nil: any node).
	Pod *corev1.PodSpec
	// Found: a value of a common image shape no pod template renders
	// (not declared): an operator may run it, or nothing may; a failure
	// is a warning.
	Found bool
}

// FromObjects are the images of objs' pod templates (the objects and
// hooks of a render, namespaced objects without a namespace in
// releaseNamespace), in manifest order, init containers first. hooks
// names the objects that are hooks ("Kind namespace/name").
func FromObjects(objs []*unstructured.Unstructured, releaseNamespace string, hooks map[string]bool) []Use {
	var out []Use
	for _, o := range objs {
		w, ok := applycheck.Workload(o, releaseNamespace)
		if !ok || w.Template == nil {
			continue
		}
		spec := &w.Template.Spec
		what := w.Object
		if hooks[w.Object] {
			what += " (a hook)"
		}
		var secrets []string
		for _, s := range spec.ImagePullSecrets {
			if s.Name != "" {
				secrets = append(secrets, s.Name)
			}
		}
		sa := spec.ServiceAccountName
		if sa == "" {
			sa = spec.DeprecatedServiceAccount
		}
		if sa == "" {
			sa = "default"
		}
		add := func(kind string, cs []corev1.Container) {
			for _, c := range cs {
				out = append(out, Use{Where: fmt.Sprintf("%s, %s %s", what, kind, c.Name), Image: c.Image,
					Namespace: w.Namespace, ServiceAccount: sa, PullSecrets: secrets, Pod: spec, Kind: w.Kind})
			}
		}
		add("init container", spec.InitContainers)
		add("container", spec.Containers)
	}
	return out
}

// Declared is an image the spec says the values name (images.values):
// whole at Image, or in pieces at Registry, Repository, Tag and Digest
// (values paths; Repository required with pieces). At names the entry in
// the spec.
type Declared struct {
	Image, Registry, Repository, Tag, Digest string
	At                                       string
}

// FromValues are the images the values name: each declared one (an error
// names the entry whose path is unset or not a string), then, with
// discover, each map of the common image shape ({repository, tag} with an
// optional registry) whose image no use in rendered already runs, those
// under a top-level key set enabled: false left out.
func FromValues(vals map[string]any, declared []Declared, discover bool, rendered []Use) ([]Use, error) {
	var out []Use
	for _, d := range declared {
		ref, err := d.reference(vals)
		if err != nil {
			return nil, err
		}
		out = append(out, Use{Where: "values " + d.describe() + " (" + d.At + ")", Image: ref})
	}
	if !discover {
		return out, nil
	}
	seen := map[string]bool{}
	for _, u := range append(rendered, out...) {
		seen[u.Image] = true
	}
	for _, f := range shaped(vals, nil) {
		if seen[f.ref] || disabled(vals, f.keys) {
			continue
		}
		seen[f.ref] = true
		out = append(out, Use{Where: "values " + strings.Join(f.keys, "."), Image: f.ref, Found: true})
	}
	return out, nil
}

// reference is d's image in vals.
func (d Declared) reference(vals map[string]any) (string, error) {
	get := func(field, path string, required bool) (string, error) {
		if path == "" {
			return "", nil
		}
		p, err := values.ParsePattern(path)
		if err != nil || !p.Concrete() {
			return "", fmt.Errorf("%s.%s: %q is not a values path", d.At, field, path)
		}
		v, ok := values.Lookup(vals, p.Keys())
		if !ok || v == nil {
			if required {
				return "", fmt.Errorf("%s.%s: %s is not set in the values the chart renders with", d.At, field, path)
			}
			return "", nil
		}
		switch t := v.(type) {
		case string:
			return t, nil
		case int, int64, float64:
			return fmt.Sprint(t), nil // a tag written as a number (1.27)
		}
		return "", fmt.Errorf("%s.%s: %s is %T, not an image's string", d.At, field, path, v)
	}
	if d.Image != "" {
		return get("image", d.Image, true)
	}
	repo, err := get("repository", d.Repository, true)
	if err != nil {
		return "", err
	}
	reg, err := get("registry", d.Registry, false)
	if err != nil {
		return "", err
	}
	tag, err := get("tag", d.Tag, false)
	if err != nil {
		return "", err
	}
	digest, err := get("digest", d.Digest, false)
	if err != nil {
		return "", err
	}
	return join(reg, repo, tag, digest), nil
}

func (d Declared) describe() string {
	if d.Image != "" {
		return d.Image
	}
	return d.Repository
}

// join is an image reference from its pieces, as charts write it.
func join(registry, repository, tag, digest string) string {
	ref := repository
	if registry != "" {
		ref = strings.TrimSuffix(registry, "/") + "/" + ref
	}
	if tag != "" {
		ref += ":" + tag
	}
	if digest != "" {
		ref += "@" + digest
	}
	return ref
}

// found is an image of the common shape in values, at keys.
type found struct {
	keys []string
	ref  string
}

// shaped are the maps of vals (in key order) that hold a string
// repository and a tag (a string or a number), with an optional string
// registry: the shape of most charts' images.
func shaped(v any, keys []string) []found {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	repo, rok := m["repository"].(string)
	tag, tok := tagOf(m["tag"])
	if rok && tok && repo != "" && tag != "" {
		reg, _ := m["registry"].(string)
		return []found{{keys: append([]string(nil), keys...), ref: join(reg, repo, tag, "")}}
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []found
	for _, k := range names {
		out = append(out, shaped(m[k], append(keys, k))...)
	}
	return out
}

func tagOf(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case int, int64, float64:
		return fmt.Sprint(t), true
	}
	return "", false
}

// disabled says whether keys lie under a top-level map whose enabled is
// false: a subchart or a component the values turn off.
func disabled(vals map[string]any, keys []string) bool {
	if len(keys) == 0 {
		return false
	}
	m, ok := vals[keys[0]].(map[string]any)
	if !ok {
		return false
	}
	e, ok := m["enabled"].(bool)
	return ok && !e
}

// hookObjects names the objects of a render that are Helm hooks.
func hookObjects(objs []*unstructured.Unstructured, releaseNamespace string) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		if _, ok := o.GetAnnotations()["helm.sh/hook"]; !ok {
			continue
		}
		ns := o.GetNamespace()
		if ns == "" {
			ns = releaseNamespace
		}
		out[fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName())] = true
	}
	return out
}

// podSecret decodes a Secret of a render.
func podSecret(o *unstructured.Unstructured) (*corev1.Secret, bool) {
	if o.GetKind() != "Secret" || o.GroupVersionKind().Group != "" {
		return nil, false
	}
	var s corev1.Secret
	if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s) != nil {
		return nil, false
	}
	// a chart may write stringData; the API server moves it to data
	for k, v := range s.StringData {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
	}
	return &s, true
}

// PullReads are what the check reads to pull as the pods of objs (a
// render, hooks included) do, with the kind of the object that makes
// them: each pod's ServiceAccount and the pull secrets it names, with
// those of a ServiceAccount objs render.
func PullReads(objs []*unstructured.Unstructured, releaseNamespace string) []suc.PullRead {
	rendered := indexed(objs, releaseNamespace)
	var out []suc.PullRead
	seen := map[string]bool{}
	for _, u := range FromObjects(objs, releaseNamespace, nil) {
		secrets := append([]string(nil), u.PullSecrets...)
		if o, ok := rendered["ServiceAccount "+u.Namespace+"/"+u.ServiceAccount]; ok {
			var sa corev1.ServiceAccount
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sa) == nil {
				for _, ref := range sa.ImagePullSecrets {
					secrets = append(secrets, ref.Name)
				}
			}
		}
		key := u.Namespace + "/" + u.Kind + "/" + u.ServiceAccount + "/" + strings.Join(secrets, ",")
		if !seen[key] {
			seen[key] = true
			out = append(out, suc.PullRead{Namespace: u.Namespace, Kind: u.Kind, ServiceAccount: u.ServiceAccount, Secrets: secrets})
		}
	}
	return out
}
