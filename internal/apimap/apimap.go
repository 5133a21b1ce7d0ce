// Package apimap maps the objects of a release's stored manifest whose
// API version the cluster no longer serves to the version that replaces
// it, as helm-mapkubeapis does (klipper-helm runs it before every
// install): Helm 4 cannot upgrade, or roll back to, a revision whose
// manifest it cannot build ("unable to build kubernetes objects from
// current release manifest"). The replacement is Kubernetes' own: the API
// lifecycle k8s.io/api declares for a removed type
// (APILifecycleReplacement: policy/v1beta1 PodDisruptionBudget →
// policy/v1), else the version of the same group and kind the cluster
// serves. It asks the cluster nothing itself: what it serves comes
// through a RESTMapper.
package apimap

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
)

// Mapping is one object of a manifest at a version the cluster does not
// serve, and the version it maps to ("" when nothing replaces it).
type Mapping struct {
	Object   string // Kind namespace/name, as the manifest names it
	From, To string // apiVersions
}

// String is the mapping for people: `PodDisruptionBudget app/web:
// policy/v1beta1 → policy/v1`.
func (m Mapping) String() string {
	to := m.To
	if to == "" {
		to = "(nothing the cluster serves replaces it)"
	}
	return fmt.Sprintf("%s: %s → %s", m.Object, m.From, to)
}

// Unserved are the objects of a manifest (as manifest.Objects reads it)
// whose version mapper does not serve, each with its replacement (To ""
// when there is none), in manifest order.
func Unserved(objs []*unstructured.Unstructured, mapper meta.RESTMapper) []Mapping {
	var out []Mapping
	for _, o := range objs {
		if m, ok := unserved(o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName(), mapper); ok {
			out = append(out, m)
		}
	}
	return out
}

// Map is text (a stored manifest) with each object Unserved finds rewritten to its
// replacement (its apiVersion line; nothing else changes, as
// helm-mapkubeapis does), and the mappings made. An object with no
// replacement is an error naming it: its revision cannot be upgraded.
func Map(text string, mapper meta.RESTMapper) (string, []Mapping, error) {
	var mapped []Mapping
	out := text
	for i, doc := range manifest.Documents(text) {
		m, ok, err := unservedDoc(doc, mapper)
		if err != nil {
			return "", nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if !ok {
			continue
		}
		if m.To == "" {
			return "", nil, fmt.Errorf("%s is at %s, which this cluster does not serve, and no version it serves replaces it", m.Object, m.From)
		}
		line := regexp.MustCompile(`(?m)^apiVersion:[ \t]*["']?` + regexp.QuoteMeta(m.From) + `["']?[ \t]*$`)
		if !line.MatchString(doc) {
			return "", nil, fmt.Errorf("%s: its apiVersion %s is not a line of its own in the stored manifest", m.Object, m.From)
		}
		out = strings.ReplaceAll(out, doc, line.ReplaceAllLiteralString(doc, "apiVersion: "+m.To))
		mapped = append(mapped, m)
	}
	return out, mapped, nil
}

// unservedDoc is doc's object when mapper does not serve its version, with
// its replacement; ok false for one it serves, or no object.
func unservedDoc(doc string, mapper meta.RESTMapper) (Mapping, bool, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name, Namespace string
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		return Mapping{}, false, err
	}
	m, ok := unserved(head.APIVersion, head.Kind, head.Metadata.Namespace, head.Metadata.Name, mapper)
	return m, ok, nil
}

// unserved is the object of apiVersion, kind, namespace and name when
// mapper does not serve its version, with its replacement; ok false for
// one it serves, or one that is no object.
func unserved(apiVersion, kind, namespace, name string, mapper meta.RESTMapper) (Mapping, bool) {
	if kind == "" || apiVersion == "" {
		return Mapping{}, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return Mapping{}, false // not an object the API server could take: not this package's to say
	}
	gvk := gv.WithKind(kind)
	if isServed(gvk, mapper) {
		return Mapping{}, false
	}
	if namespace != "" {
		name = namespace + "/" + name
	}
	m := Mapping{Object: kind + " " + name, From: apiVersion}
	if to, ok := Replacement(gvk, mapper); ok {
		m.To = to.GroupVersion().String()
	}
	return m, true
}

// isServed says whether mapper serves gvk, or cannot tell (an error other
// than "no match").
func isServed(gvk schema.GroupVersionKind, mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil || !meta.IsNoMatchError(err)
}

// ServedAs is the version and kind the cluster serves gvk's objects at:
// gvk itself when it serves it (or cannot tell), else its Replacement;
// false when nothing it serves replaces it.
func ServedAs(gvk schema.GroupVersionKind, mapper meta.RESTMapper) (schema.GroupVersionKind, bool) {
	if isServed(gvk, mapper) {
		return gvk, true
	}
	return Replacement(gvk, mapper)
}

// lifecycle is what k8s.io/api generates for a type with an API
// lifecycle (zz_generated.prerelease-lifecycle.go).
type lifecycle interface {
	APILifecycleReplacement() schema.GroupVersionKind
}

// Replacement is the version and kind that replace gvk, which the cluster
// does not serve: Kubernetes' declared replacement when the cluster
// serves it (extensions/v1beta1 Ingress → networking.k8s.io/v1), else the
// cluster's preferred version of the same group and kind
// (autoscaling/v2beta2 HorizontalPodAutoscaler → autoscaling/v2); false
// when neither is served.
func Replacement(gvk schema.GroupVersionKind, mapper meta.RESTMapper) (schema.GroupVersionKind, bool) {
	if obj, err := scheme.Scheme.New(gvk); err == nil {
		if l, ok := obj.(lifecycle); ok {
			to := l.APILifecycleReplacement()
			if _, err := mapper.RESTMapping(to.GroupKind(), to.Version); to.Kind != "" && err == nil {
				return to, true
			}
		}
	}
	if m, err := mapper.RESTMapping(gvk.GroupKind()); err == nil {
		return m.GroupVersionKind, true
	}
	return schema.GroupVersionKind{}, false
}
