package provenance

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file finds by rendering the value that renders a field no marker
// reached: a value a template also tests in a condition (`if gt (int
// .Values.replicas) 1`, `ternary`, `default`: marking it would change
// what the template does, so it is left unmarked), or any field of a
// chart that does not render with its values marked at all (its
// templates check them: a `fail` on a changed image). A candidate is a
// value of the chart
//
//   - that holds the field's rendered value: tried with the live value;
//   - whose text is inside the field's rendered text once (a port in
//     `--entryPoints.web.address=:8000/tcp`, a protocol lowered into
//     it): tried with the part of the live text between the same
//     surrounding text;
//   - that is empty and named as the field is (`namespaceOverride` for
//     `.metadata.namespace`, `serviceAccount.name` for
//     `.serviceAccountName`): the `default` a template falls back from,
//     tried with the live value.
//
// The chart is rendered with the candidate set (Map.check), and the first
// with which the field renders the live value is the answer, with the
// other fields it changes. An answer is never given without that render.

// ProbeNote says an answer was found by rendering, not by a marker.
const ProbeNote = "found by rendering: the chart renders the live value with this value set (a marker could not reach the field)"

// MaxProbes is how many candidate values a field is rendered with at
// most, and MaxProbeRenders how many probing renders a Map makes in all:
// each costs one render of the chart.
const (
	MaxProbes       = 8
	MaxProbeRenders = 128
)

// probe is one candidate: the value at at, set to value.
type probe struct {
	at    []Step
	value any
}

// probes are the candidates for the field at steps of id, whose live
// value is live, the ones named as the field first (replicas for
// .spec.replicas), at most MaxProbes. None when the field is not a scalar
// of the real render, or already renders live.
func (m *Map) probes(id ObjectID, steps []Step, live any) []probe {
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
	rendered, liveText := text(values.Normalize(rv)), text(values.Normalize(live))
	_, liveIsText := live.(string)
	var out []probe
	var walk func(at []Step, v any)
	walk = func(at []Step, v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(append(at[:len(at):len(at)], k), x[k])
			}
			return
		case []any:
			for i, e := range x {
				walk(append(at[:len(at):len(at)], i), e)
			}
			return
		case bool:
			return
		}
		here := append([]Step(nil), at...)
		if values.Equal(values.Normalize(v), values.Normalize(rv)) {
			out = append(out, probe{here, live})
			return
		}
		vt := text(values.Normalize(v))
		if vt == "" {
			if namedAs(here, name) {
				out = append(out, probe{here, live})
			}
			return
		}
		if !liveIsText {
			return
		}
		for _, fold := range []func(string) string{func(s string) string { return s }, strings.ToLower} {
			if piece, ok := between(rendered, fold(vt), liveText); ok {
				out = append(out, probe{here, coerce(piece, v)})
				return
			}
		}
	}
	walk(nil, m.values)
	named := func(p probe) int {
		if k, _ := p.at[len(p.at)-1].(string); name != "" && k == name || namedAs(p.at, name) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b probe) int { return cmp.Compare(named(a), named(b)) })
	n := min(len(out), MaxProbes, MaxProbeRenders-m.probed)
	if n <= 0 {
		return nil
	}
	m.probed += n
	return out[:n]
}

// between is the part of live that stands where vt stands in rendered,
// when vt is in rendered once and live keeps the text around it.
func between(rendered, vt, live string) (string, bool) {
	i := strings.Index(rendered, vt)
	if i < 0 || strings.Contains(rendered[i+1:], vt) {
		return "", false
	}
	before, after := rendered[:i], rendered[i+len(vt):]
	if len(live) < len(before)+len(after) || !strings.HasPrefix(live, before) || !strings.HasSuffix(live, after) {
		return "", false
	}
	piece := live[len(before) : len(live)-len(after)]
	return piece, piece != ""
}

// namedAs says whether the value at at is named as the field name is: its
// key, or its last two keys run together, is the name or starts it
// (`namespaceOverride`, `serviceAccount.name` for `serviceAccountName`),
// letters' case aside.
func namedAs(at []Step, name string) bool {
	if name == "" {
		return false
	}
	name = strings.ToLower(name)
	var keys []string
	for _, s := range at[max(0, len(at)-2):] {
		if k, ok := s.(string); ok {
			keys = append(keys, strings.ToLower(k))
		}
	}
	if len(keys) == 0 {
		return false
	}
	last := keys[len(keys)-1]
	return last == name || strings.HasPrefix(last, name) || strings.Join(keys, "") == name
}
