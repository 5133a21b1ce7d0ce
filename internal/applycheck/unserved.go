package applycheck

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the check of the kinds the new chart's objects are of: one
// the cluster does not serve at the version the chart names fails Helm's
// upgrade ("no matches for kind"), unless a CRD of the same manifest
// defines it (Helm applies CRDs first).

func init() {
	manifestChecks = append(manifestChecks, func(_ context.Context, s Scope, res *Result) error {
		for _, u := range unserved(s.Read, append(slices.Clip(s.Objects), s.Request.CRDs...), s.Checker.Reader.Mapper) {
			res.Findings = append(res.Findings, u)
		}
		return nil
	})
}

// Unserved is an object of the new chart whose kind the cluster does not
// serve at its version, and no CRD of the chart's templates defines.
type Unserved struct {
	Object     string // Kind namespace/name
	APIVersion string // as the chart names it
	// Served are the versions of the same group and kind the cluster
	// serves, if any (autoscaling/v2 for a chart's autoscaling/v2beta2).
	Served []string
}

// unserved are the objects of read whose kind the cluster does not serve
// (liveobjects: no mapping), less those a CustomResourceDefinition among
// objs defines at that version, with the served versions of their kind.
func unserved(read []liveobjects.Object, objs []*unstructured.Unstructured, mapper meta.RESTMapper) []Unserved {
	defined := map[schema.GroupVersionKind]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" || o.GroupVersionKind().Group != "apiextensions.k8s.io" {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			if m, ok := v.(map[string]any); ok {
				if name, _ := m["name"].(string); name != "" {
					defined[schema.GroupVersionKind{Group: group, Version: name, Kind: kind}] = true
				}
			}
		}
	}
	var out []Unserved
	for _, o := range read {
		if o.NoKind == nil || !meta.IsNoMatchError(o.NoKind) {
			continue
		}
		gvk := o.Want.GroupVersionKind()
		if defined[gvk] {
			continue
		}
		u := Unserved{Object: o.Name(), APIVersion: o.Want.GetAPIVersion()}
		if ms, err := mapper.RESTMappings(gvk.GroupKind()); err == nil {
			for _, m := range ms {
				if v := m.GroupVersionKind.GroupVersion().String(); !slices.Contains(u.Served, v) {
					u.Served = append(u.Served, v)
				}
			}
			slices.Sort(u.Served)
		}
		out = append(out, u)
	}
	return out
}

// Verdict is a refusal, whoever applies.
func (u Unserved) Verdict(Applier) (string, *values.Warning) { return u.String(), nil }

// String is the refusal: the object, the version the chart names, what the
// cluster serves, and why it matters.
func (u Unserved) String() string {
	served := "no version of this kind"
	if len(u.Served) > 0 {
		served = "only " + strings.Join(u.Served, ", ")
	}
	return fmt.Sprintf("unserved kind: %s is at %s, which this cluster does not serve (it serves %s): Helm's upgrade would fail with \"no matches for kind\"; "+
		"render it at a served version (a value of the chart may select the API version), or install its CRD first (the spec's apply.crds: create or createReplace does it from the chart's crds/; Helm, Fleet and klipper-helm do not install them on an upgrade)",
		u.Object, u.APIVersion, served)
}
