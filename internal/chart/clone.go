package chart

import (
	"maps"
	"slices"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// clone copies c and its subcharts deeply enough that Helm's dependency
// processing, which rewrites metadata, dependency lists and values, cannot
// reach the original. Files are shared: nothing here writes to them.
func clone(c *chart.Chart) *chart.Chart {
	out := &chart.Chart{
		Raw:       c.Raw,
		Metadata:  cloneMetadata(c.Metadata),
		Lock:      c.Lock,
		Templates: slices.Clone(c.Templates),
		Values:    copyMap(c.Values),
		Schema:    c.Schema,
		Files:     slices.Clone(c.Files),
	}
	deps := make([]*chart.Chart, 0, len(c.Dependencies()))
	for _, d := range c.Dependencies() {
		deps = append(deps, clone(d))
	}
	out.SetDependencies(deps...)
	return out
}

func cloneMetadata(md *chart.Metadata) *chart.Metadata {
	if md == nil {
		return nil
	}
	out := *md
	out.Sources = slices.Clone(md.Sources)
	out.Keywords = slices.Clone(md.Keywords)
	out.Annotations = maps.Clone(md.Annotations)
	if md.Maintainers != nil {
		out.Maintainers = make([]*chart.Maintainer, len(md.Maintainers))
		for i, m := range md.Maintainers {
			if m != nil {
				mc := *m
				out.Maintainers[i] = &mc
			}
		}
	}
	if md.Dependencies != nil {
		out.Dependencies = make([]*chart.Dependency, len(md.Dependencies))
		for i, d := range md.Dependencies {
			if d == nil {
				continue
			}
			dc := *d
			dc.Tags = slices.Clone(d.Tags)
			dc.ImportValues, _ = values.DeepCopy(d.ImportValues).([]any)
			out.Dependencies[i] = &dc
		}
	}
	return &out
}

// copyMap deep-copies a values map as Helm holds it; nil stays nil.
func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return values.DeepCopy(m).(map[string]any)
}

// normalized turns a values tree from Helm into a fresh normalised tree of
// package values.
func normalized(m map[string]any) map[string]any {
	out, _ := values.Normalize(values.DeepCopy(m)).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out
}
