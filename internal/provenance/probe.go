package provenance

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

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
//     `.serviceAccountName`, an `existingSecret` for a `secretName`):
//     the `default` a template falls back from, tried with the live value;
//   - that is empty and named as a text the templates write in its place
//     (Map.FallsBackTo: the release namespace for a `namespaceOverride`,
//     the chart's appVersion for a `tag`) and the field's text holds:
//     tried with the part of the live text in that text's place;
//   - that is empty and beside a value an image field is rendered from
//     (`image.tag` under `default .Chart.AppVersion`, `image.digest`,
//     `image.sha`, a `repository` a helper builds from other values):
//     tried with that part of the live image reference.
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

// probe is one candidate: the value at at, set to value. Those named as
// the field is are tried first, each group in the order of rank: a value
// that holds the field's value, then one in its text, then one of its
// image, then an empty one.
type probe struct {
	at    []Step
	value any
	rank  int
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
	if flag, ok := flagOf(rendered, liveText); ok && liveIsText {
		// an argument `--flag=value` is named by its flag, and read after it
		name, rendered, liveText = flag, rendered[len(flag)+3:], liveText[len(flag)+3:]
	}
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
			// a switch the template writes as it is
			// (automountServiceAccountToken), or quoted ("true")
			if lb, ok := live.(bool); ok && values.Equal(x, rv) {
				out = append(out, probe{append([]Step(nil), at...), lb, 0})
			} else if lb, err := strconv.ParseBool(liveText); err == nil && liveIsText && rendered == strconv.FormatBool(x) {
				out = append(out, probe{append([]Step(nil), at...), lb, 0})
			}
			return
		}
		here := append([]Step(nil), at...)
		if values.Equal(values.Normalize(v), values.Normalize(rv)) {
			out = append(out, probe{here, live, 0})
			return
		}
		vt := text(values.Normalize(v))
		if vt == "" {
			if namedAs(here, name) {
				out = append(out, probe{here, live, 3})
			}
			return
		}
		if !liveIsText {
			return
		}
		for _, fold := range []func(string) string{func(s string) string { return s }, strings.ToLower} {
			if piece, ok := between(rendered, fold(vt), liveText); ok {
				out = append(out, probe{here, coerce(piece, v), 1})
				return
			}
		}
	}
	walk(nil, m.values)
	if strings.HasSuffix(strings.ToLower(name), "image") && liveIsText {
		out = append(out, m.imageProbes(rendered, liveText)...)
	}
	if liveIsText {
		out = append(out, m.fallbackProbes(rendered, liveText)...)
	}
	named := func(p probe) int {
		if k, _ := p.at[len(p.at)-1].(string); name != "" && k == name || namedAs(p.at, name) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b probe) int {
		return cmp.Or(cmp.Compare(named(a), named(b)), cmp.Compare(a.rank, b.rank))
	})
	n := min(len(out), MaxProbes, MaxProbeRenders-m.probed)
	if n <= 0 {
		return nil
	}
	m.probed += n
	return out[:n]
}

// imageProbes are the candidates of an image field rendered as rendered,
// live now: the empty values beside a value whose text the image holds,
// each tried with the part of the live reference its name says it is.
func (m *Map) imageProbes(rendered, live string) []probe {
	was, now := imageRef(rendered), imageRef(live)
	var out []probe
	var walk func(at []Step, v any)
	walk = func(at []Step, v any) {
		x, ok := v.(map[string]any)
		if !ok {
			return
		}
		beside := false // a value of x is in the rendered image
		for _, e := range x {
			if t := text(values.Normalize(e)); e != nil && t != "" && strings.Contains(rendered, t) {
				if _, isMap := e.(map[string]any); !isMap {
					beside = true
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			here := append(at[:len(at):len(at)], k)
			if sub, isMap := x[k].(map[string]any); isMap {
				walk(here, sub)
				continue
			}
			if !beside || (x[k] != nil && text(values.Normalize(x[k])) != "") {
				continue
			}
			var tries []string
			switch strings.ToLower(k) {
			case "tag", "version":
				if now.tag != was.tag {
					tries = []string{now.tag}
				}
			case "digest":
				tries = []string{now.digest}
			case "sha":
				tries = []string{strings.TrimPrefix(now.digest, "sha256:"), now.digest}
			case "repository":
				if now.name != was.name {
					tries = []string{now.name}
				}
			}
			for _, t := range tries {
				if t != "" {
					out = append(out, probe{append([]Step(nil), here...), t, 2})
				}
			}
		}
	}
	walk(nil, m.values)
	return out
}

// fallback is a text templates write when a value named by one of keys
// is empty (FallsBackTo).
type fallback struct {
	text string
	keys []string
}

// FallsBackTo tells probing that templates write text where a value whose
// key starts with one of keys (letters' case aside) is empty: the release
// namespace for a `namespaceOverride`, the chart's appVersion for a
// `tag`. An empty such value is then a candidate of a field whose
// rendered text holds text once, tried with the part of the live text in
// its place.
func (m *Map) FallsBackTo(text string, keys ...string) {
	if text != "" && len(keys) > 0 {
		m.fallbacks = append(m.fallbacks, fallback{text: text, keys: keys})
	}
}

// fallbackProbes are the candidates FallsBackTo gives a field rendered as
// rendered, live now.
func (m *Map) fallbackProbes(rendered, live string) []probe {
	var out []probe
	for _, f := range m.fallbacks {
		piece, ok := between(rendered, f.text, live)
		if !ok {
			continue
		}
		var walk func(at []Step, v any)
		walk = func(at []Step, v any) {
			if x, isMap := v.(map[string]any); isMap {
				for _, k := range slices.Sorted(maps.Keys(x)) {
					walk(append(at[:len(at):len(at)], k), x[k])
				}
				return
			}
			if len(at) == 0 || v != nil && text(values.Normalize(v)) != "" {
				return
			}
			key, _ := at[len(at)-1].(string)
			for _, k := range f.keys {
				if strings.HasPrefix(strings.ToLower(key), strings.ToLower(k)) {
					out = append(out, probe{append([]Step(nil), at...), piece, 2})
					return
				}
			}
		}
		walk(nil, m.values)
	}
	return out
}

// reference is an image reference's name, tag and digest.
type reference struct{ name, tag, digest string }

// imageRef splits an image reference: the digest after `@`, the tag after
// the last `:` past the last `/`.
func imageRef(s string) reference {
	var r reference
	s, r.digest, _ = strings.Cut(s, "@")
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		s, r.tag = s[:i], s[i+1:]
	}
	r.name = s
	return r
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

// flagOf is the flag of an argument `--flag=value` that rendered and live
// both are.
func flagOf(rendered, live string) (string, bool) {
	flag, _, ok := strings.Cut(strings.TrimPrefix(rendered, "--"), "=")
	if !ok || !strings.HasPrefix(rendered, "--") || flag == "" || !strings.HasPrefix(live, "--"+flag+"=") {
		return "", false
	}
	return flag, true
}

// namedAs says whether the value at at is named as the field name is: its
// key, or its last two keys run together, is the name or starts it
// (`namespaceOverride`, `serviceAccount.name` for `serviceAccountName`,
// `clusterResourceNamespace` for `--cluster-resource-namespace`), letters'
// case and dashes aside; an `existing…` value names a field of a name, a
// tag or a version a field of a version (`app.kubernetes.io/version`).
func namedAs(at []Step, name string) bool {
	if name == "" {
		return false
	}
	name = strings.ToLower(strings.ReplaceAll(name, "-", ""))
	var keys []string
	for _, s := range at[max(0, len(at)-2):] {
		if k, ok := s.(string); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return false
	}
	key := keys[len(keys)-1]
	// the name starts the key at a word's end: namespace|Override, not
	// name|space
	if len(key) > len(name) && strings.EqualFold(key[:len(name)], name) && unicode.IsUpper(rune(key[len(name)])) {
		return true
	}
	last := strings.ToLower(key)
	switch {
	case strings.HasPrefix(last, "existing") && strings.HasSuffix(name, "name"):
		return true // existingSecret for a secretName, existingClaim for a claimName
	case (last == "tag" || last == "version") && strings.HasSuffix(name, "/version"):
		return true // the recommended label app.kubernetes.io/version
	}
	return last == name || strings.ToLower(strings.Join(keys, "")) == name
}
