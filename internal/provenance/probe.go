package provenance

import (
	"cmp"
	"maps"
	"slices"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file finds by rendering the value that renders a field no marker
// reached: a number a template also compares in a condition (`if gt (int
// .Values.replicas) 1`: marking it would flip the condition, so it is
// left unmarked), or any field of a chart that does not render with its
// values marked at all (its templates check them: a `fail` on a changed
// image). Each value of the chart that holds the field's rendered value is
// a candidate; set to the live value, the chart is rendered (Map.check),
// and the first with which the field renders the live value is the
// answer, with the other fields it changes.

// ProbeNote says an answer was found by rendering, not by a marker.
const ProbeNote = "found by rendering: the chart renders the live value with this value set (a marker could not reach the field)"

// MaxProbes is how many candidate values a field is rendered with at
// most, and MaxProbeRenders how many probing renders a Map makes in all:
// each costs one render of the chart.
const (
	MaxProbes       = 8
	MaxProbeRenders = 32
)

// probes are the values to try for the field at steps of id, whose live
// value is live: those that hold the field's rendered value (a scalar),
// the ones named as the field first (replicas for .spec.replicas), at
// most MaxProbes. None when the field is not a scalar of the real
// render, or already renders live.
func (m *Map) probes(id ObjectID, steps []Step, live any) [][]Step {
	t := m.find(id)
	if t == nil || len(steps) == 0 {
		return nil
	}
	rv, ok := At(t.real, steps)
	if !ok || rv == nil || values.Equal(rv, live) {
		return nil
	}
	switch rv.(type) {
	case map[string]any, []any:
		return nil
	}
	name, _ := steps[len(steps)-1].(string)
	var out [][]Step
	var walk func(at []Step, v any)
	walk = func(at []Step, v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(append(at[:len(at):len(at)], k), x[k])
			}
		case []any:
			for i, e := range x {
				walk(append(at[:len(at):len(at)], i), e)
			}
		default:
			if values.Equal(values.Normalize(v), values.Normalize(rv)) {
				out = append(out, append([]Step(nil), at...))
			}
		}
	}
	walk(nil, m.values)
	named := func(at []Step) int {
		if k, _ := at[len(at)-1].(string); name != "" && k == name {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b []Step) int { return cmp.Compare(named(a), named(b)) })
	n := min(len(out), MaxProbes, MaxProbeRenders-m.probed)
	if n <= 0 {
		return nil
	}
	m.probed += n
	return out[:n]
}
