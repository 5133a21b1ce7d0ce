package provenance

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file reads back a field that renders the live value only when a
// value a condition tests is set otherwise: a digest dropped (`{{- if
// .digest }}@{{ .digest }}{{ end }}` with a digest in the defaults), a
// port or a flag a switch adds, an argument a range over an empty list or
// map adds, a Secret's key `b64enc` renders from a value only when it is
// set (a random one else). Tracing keeps such values unmarked, so that
// each condition goes the way it goes for real, and no marker reaches
// what the other branch renders.
//
// A candidate is a value a condition of the chart tests (Map.Tests), set
// to the other side of its test: a boolean flipped; a string emptied, or
// set when empty, or to a text it is compared with (`eq .Values.kind
// "DaemonSet"`); a list or map a range reads given as many more elements
// as the live list has more than the rendered one. The chart is traced
// again with that value set (Map.RetraceWith: rendered as it is and
// marked, the value set put where a marker shows what it renders), and
// the field read back in that trace (readBack). The candidate with what
// that reading changes is the answer, checked by rendering it as every
// answer is. The candidates are tried most likely first: a value named
// as the field, the object or what the live value holds, and a value
// beside others whose text the live value holds. At most
// MaxConditionProbes a field, MaxRetraces traces a Map.

// Tested is a value a condition of the chart's templates tests: its path
// in the effective values, whether a range reads it, and the texts it is
// compared with.
type Tested struct {
	At       []string
	Ranged   bool
	Literals []any // strings and integers
}

// Retracer traces the chart again, with vals as its effective values.
type Retracer func(vals map[string]any) (*Map, error)

// RetraceWith lets m read back a field through the other branch of a
// condition (this file): tested gives the values the chart's conditions
// test (asked once, when a field first needs them), r traces the chart
// with one set otherwise.
func (m *Map) RetraceWith(r Retracer, tested func() []Tested) {
	m.retrace, m.tested = r, tested
}

// MaxConditionProbes is how many candidate settings of tested values a
// field is read back through at most; MaxRetraces how many traces with
// one set a Map makes in all (each costs two renders of the chart).
const (
	MaxConditionProbes = 8
	MaxRetraces        = 64
)

// ConditionNote says an answer was found through another branch of a
// condition.
const ConditionNote = "found through a condition: with the value(s) a condition tests set so, the chart renders the live value"

// ReasonBudget is added to why a field is not traced when the traces
// conditional probing may make were all made.
var ReasonBudget = fmt.Sprintf("conditional probing stopped: the %d traces it may make were made", MaxRetraces)

// candidate is a tested value at at, set to value: a value where
// holes stand (holeKeyOf, hole) for the keys and elements to be read back.
type candidate struct {
	at    []Step
	value any
	score int
}

func (c candidate) key() string {
	b, _ := json.Marshal(c.value)
	return PathString(c.at) + "=" + string(b)
}

// readByCondition reads the field at steps of id back through each
// candidate in turn; the first whose reading renders live is the answer.
// When none does and the field had more candidates than it may try,
// cut says how many were left.
func (m *Map) readByCondition(id ObjectID, steps []Step, live any, secret bool) (r Reading, ok bool, cut string) {
	if m.retrace == nil {
		return Reading{}, false, ""
	}
	if m.tested != nil {
		m.tests, m.tested = m.tested(), nil
	}
	candidates, all := m.conditionCandidates(id, steps, live)
	if all > len(candidates) {
		cut = fmt.Sprintf("conditional probing tried the %d likeliest of %d settings of the values the chart's conditions test", len(candidates), all)
	}
	for _, c := range candidates {
		sub := m.retraced(c)
		if sub == nil {
			continue
		}
		t := sub.find(id)
		if t == nil || t.marked == nil {
			continue
		}
		rv, rok := At(t.real, steps)
		mv, mok := At(t.marked, steps)
		var as []Assignment
		if !rok {
			// a key the live map adds: the one c's hole key renders, if any
			if rv, mv, as, rok = sub.holeKeyField(t, steps); !rok {
				continue
			}
			mok = true
		}
		if !mok {
			continue
		}
		if !renders(rv, live) {
			back, ok := sub.readBack(mv, rv, live)
			if !ok {
				continue
			}
			as = append(as, back...)
		}
		found, ok := m.withCandidate(c, as)
		if !ok {
			continue
		}
		if r := m.reading(Source{Assignments: found, Note: ConditionNote}, id, steps, live, secret); r.Mapped() {
			return r, true, ""
		}
	}
	return Reading{}, false, cut
}

// holeKeyField is, for a field at steps that names a key the traced
// object t does not render (one the live map adds), what the key a
// candidate's hole put in that map renders: its real and marked render,
// and the assignment that names the key as steps does.
func (m *Map) holeKeyField(t *traced, steps []Step) (rv, mv any, as []Assignment, ok bool) {
	if len(steps) == 0 {
		return nil, nil, nil, false
	}
	key, isKey := steps[len(steps)-1].(string)
	real, rok := At(t.real, steps[:len(steps)-1])
	marked, mok := At(t.marked, steps[:len(steps)-1])
	rm, rIsMap := real.(map[string]any)
	mm, mIsMap := marked.(map[string]any)
	if !isKey || !rok || !mok || !rIsMap || !mIsMap {
		return nil, nil, nil, false
	}
	for mk, v := range mm {
		parts := split(mk)
		if len(parts) != 1 || parts[0].mark < 0 {
			continue
		}
		at := m.marks.at[parts[0].mark]
		if len(at) == 0 {
			continue
		}
		if hk, isHole := at[len(at)-1].(KeyOf); isHole {
			if r, ok := rm[string(hk)]; ok {
				return r, v, []Assignment{{At: at, Path: PathString(at), Value: key, Changed: true}}, true
			}
		}
	}
	return nil, nil, nil, false
}

// retraced is the trace with c set, made once; nil when it fails or the
// budget is spent.
func (m *Map) retraced(c candidate) *Map {
	k := c.key()
	if sub, ok := m.retraces[k]; ok {
		return sub
	}
	if len(m.retraces) >= MaxRetraces {
		m.budgetSpent = true
		return nil
	}
	if m.retraces == nil {
		m.retraces = map[string]*Map{}
	}
	vals, _ := setIn(values.DeepCopy(m.values), c.at, values.DeepCopy(c.value)).(map[string]any)
	sub, err := m.retrace(vals)
	if err != nil || sub.failed != "" {
		sub = nil
	}
	m.retraces[k] = sub
	return sub
}

// withCandidate is the answer of c with as, the reading of the field in
// c's trace, in m's terms: the holes of c's value filled by what as says
// of them (c's value with them is one assignment), the others as they
// are. ok is false when a hole is left: c's value would be made up.
func (m *Map) withCandidate(c candidate, as []Assignment) ([]Assignment, bool) {
	final := values.DeepCopy(c.value)
	keys := map[string]string{} // hole key → key read back
	var out []Assignment
	for _, a := range as {
		if !startsWith(a.At, c.at) {
			out = append(out, m.assign(a.At, a.Value, true))
			continue
		}
		rel := a.At[len(c.at):]
		if len(rel) == 1 {
			if k, ok := rel[0].(KeyOf); ok {
				s, isText := a.Value.(string)
				if !isText || s == "" {
					return nil, false
				}
				keys[string(k)] = s
				continue
			}
		}
		final = setIn(final, rel, a.Value)
	}
	if mp, ok := final.(map[string]any); ok {
		for hk, k := range keys {
			v, ok := mp[hk]
			if _, taken := mp[k]; !ok || taken {
				return nil, false
			}
			delete(mp, hk)
			mp[k] = v
		}
	}
	if hasHole(final) {
		return nil, false
	}
	return append([]Assignment{m.assign(c.at, final, true)}, out...), true
}

func hasHole(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if holeKey.MatchString(k) || hasHole(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasHole)
	case string:
		return x == hole
	}
	return false
}

// conditionCandidates are the candidates of the field at steps of id,
// live now, most likely first, at most MaxConditionProbes, and how many
// there were.
func (m *Map) conditionCandidates(id ObjectID, steps []Step, live any) (_ []candidate, all int) {
	t := m.find(id)
	if t == nil {
		return nil, 0
	}
	rv, _ := At(t.real, steps)
	// the values whose markers the field holds: a candidate among them
	// renders into it (a digest after the `@` the live value lacks)
	inField := map[string]bool{}
	if t.marked != nil {
		if mv, ok := At(t.marked, steps); ok {
			b, _ := json.Marshal(mv)
			for _, sm := range markerRE.FindAllStringSubmatch(string(b), -1) {
				if n, err := strconv.Atoi(sm[1]); err == nil && n < len(m.marks.at) {
					inField[PathString(m.marks.at[n])] = true
				}
			}
		}
	}
	grew := false
	more := 1 // elements a range must add
	if rl, ok := rv.([]any); ok {
		if ll, ok := live.([]any); ok && len(ll) > len(rl) {
			more, grew = len(ll)-len(rl), true
		}
	}
	liveText := fieldText(live)
	added := addedTokens(rv, live)
	words := wordsOf(id.Kind + " " + id.Name + " " + liveText)
	for _, s := range steps {
		if k, ok := s.(string); ok {
			words = append(words, wordsOf(k)...)
		}
	}
	field := ""
	for _, s := range steps {
		if k, ok := s.(string); ok {
			field = strings.ToLower(k)
		}
	}
	var out []candidate
	seen := map[string]bool{}
	add := func(at []string, v any) {
		if len(at) == 0 {
			return // the values as a whole are no candidate
		}
		c := candidate{at: StepsOf(at), value: v}
		if seen[c.key()] {
			return
		}
		seen[c.key()] = true
		c.score = m.likeness(at, words, liveText, added)
		// named as the field (env for .env), or ending so (extraArgs for .args)
		if k := strings.ToLower(at[len(at)-1]); k == field {
			c.score += 4
		} else if len(field) >= 3 && strings.HasSuffix(k, field) {
			c.score += 2
		}
		if inField[PathString(c.at)] {
			c.score += 5
		}
		switch v.(type) {
		case []any, map[string]any:
			if grew {
				c.score += 3 // a range adds the elements the live list has more
			}
		}
		out = append(out, c)
	}
	for _, tv := range m.tests {
		// a value the chart's values do not have (a commented-out
		// `# adminPassword:`) is set like a null one
		v, _ := values.Lookup(m.values, tv.At)
		switch x := v.(type) {
		case bool:
			add(tv.At, !x)
		case nil:
			add(tv.At, hole)
		case string:
			if x == "" {
				add(tv.At, hole)
			} else {
				add(tv.At, "")
			}
			for _, l := range tv.Literals {
				if l, ok := l.(string); ok && l != x {
					add(tv.At, l)
				}
			}
		case int, int64, float64:
			// a number compared with one (gt .Values.replicas 1): it, and
			// either side of it
			n := values.Normalize(x)
			for _, l := range tv.Literals {
				if l, ok := l.(int64); ok {
					for _, c := range []int64{l - 1, l, l + 1} {
						if !values.Equal(c, n) {
							add(tv.At, c)
						}
					}
				}
			}
		case []any:
			{
				l := slices.Clone(x)
				for range more {
					l = append(l, hole)
				}
				add(tv.At, l)
			}
		case map[string]any:
			if tv.Ranged || len(x) == 0 {
				mp := maps.Clone(x)
				for i := range more {
					mp[holeKeyOf(i)] = hole
				}
				add(tv.At, mp)
			}
			// its switches (a port's `expose: {default: false}`, which a
			// template reads with index)
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if b, ok := x[k].(bool); ok {
					add(append(slices.Clone(tv.At), k), !b)
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	return out[:min(len(out), MaxConditionProbes)], len(out)
}

// likeness is how much the tested value at at looks like the field's: a
// word of its path among words (the field's, its object's and the live
// value's), and each value beside it (its parent's other scalars) whose
// text the live value holds.
func (m *Map) likeness(at []string, words []string, liveText string, added map[string]bool) int {
	score := 0
	counted := map[string]bool{} // each word once: metrics.prometheus.serviceMonitor is not three times metrics
	for _, k := range at {
		for _, w := range wordsOf(k) {
			if !counted[w] && slices.ContainsFunc(words, func(f string) bool { return alike(w, f) }) {
				counted[w] = true
				score++
			}
		}
	}
	// the values beside it, and beside its parent (a switch in
	// `expose: {default: false}` beside a port's number): each whose text
	// the live value holds, more when only the live value holds it
	for up := 1; up <= 2 && up <= len(at); up++ {
		parent, _ := values.Lookup(m.values, at[:len(at)-up])
		pm, ok := parent.(map[string]any)
		if !ok {
			continue
		}
		for k, v := range pm {
			if k == at[len(at)-up] {
				continue
			}
			switch v.(type) {
			case map[string]any, []any, bool, nil:
				continue
			}
			t := text(values.Normalize(v))
			switch {
			case len(t) < 3 || !strings.Contains(liveText, t):
			case added[t]:
				score += 3
			case up == 1:
				score += 2
			}
		}
	}
	return score
}

// addedTokens are the words and numbers of live's text that rendered's
// lacks (a port's number the live Service adds).
func addedTokens(rendered, live any) map[string]bool {
	tokens := func(v any) []string {
		return strings.FieldsFunc(fieldText(v), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' && r != '-' && r != '_' && r != '/' && r != ':'
		})
	}
	had := map[string]bool{}
	for _, t := range tokens(rendered) {
		had[t] = true
	}
	out := map[string]bool{}
	for _, t := range tokens(live) {
		if !had[t] {
			out[t] = true
		}
	}
	return out
}

// alike: one word starts the other, both of three letters or more
// (arg and arguments, metric and metrics).
func alike(a, b string) bool {
	if len(a) < 3 || len(b) < 3 {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// wordsOf splits s into lower-case words at every non-letter and at each
// upper-case letter after a lower-case one (extraArgs: extra, args).
func wordsOf(s string) []string {
	var out []string
	var w []rune
	flush := func() {
		if len(w) > 0 {
			out = append(out, strings.ToLower(string(w)))
			w = w[:0]
		}
	}
	prevLower := false
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r):
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		w = append(w, r)
		prevLower = unicode.IsLower(r)
	}
	flush()
	return out
}
