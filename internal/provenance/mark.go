// Package provenance finds which values of a chart render which fields of
// its objects, by marker rendering: the chart is rendered once with every
// string and every number of its effective values replaced by a
// unique marker, and the markers found in the rendered objects are mapped
// back to the values that hold them, with the literal text around each.
// A live field can then be read back in values terms: the live image
// registry.example/web:1-hotfix of a template
// `{{ .Values.web.image.repository }}:{{ .Values.web.image.tag }}` is
// web.image.repository=registry.example/web and web.image.tag=1-hotfix.
//
// It is pure (the caller renders): no I/O, no cluster. What it cannot map
// it says, with the reason (Reason*): a field written literally, from a
// boolean or a value a condition tests; a value passed through a function or
// arithmetic that changes its text; a field under a condition on a value.
package provenance

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// A marker is markPrefix, the mark's number, markSuffix: letters and
// digits only, so YAML keeps it a plain string and no template function
// that keeps text (quote, printf, trim…) splits it.
const (
	markPrefix = "zqv"
	markSuffix = "vqz"
)

var markerRE = regexp.MustCompile(markPrefix + `([0-9]+)` + markSuffix)

// Step is one step into a values tree: a string is a map key, an int a
// list index.
type Step = any

// Marks are the values a marked tree replaced, by marker number.
type Marks struct {
	at   [][]Step // where each mark is in the values
	orig []any    // the value it replaced
	// refused says which values were left unmarked because the chart
	// refuses a marker in them, and with what error (Refused).
	refused string
	// keep are the paths of values left unmarked, and everything under
	// them: the values templates test in a condition (if eq .Values.kind
	// "Deployment"), which a marker would turn the other way.
	keep [][]string
}

// kept says whether the value at is under a path of m.keep.
func (m *Marks) kept(at []Step) bool {
	for _, k := range m.keep {
		if len(at) < len(k) {
			continue
		}
		under := true
		for i, key := range k {
			if s, ok := at[i].(string); !ok || s != key {
				under = false
				break
			}
		}
		if under {
			return true
		}
	}
	return false
}

// Len is the number of marks.
func (m *Marks) Len() int { return len(m.orig) }

// Mark returns a copy of vals with every string (the empty one too) and
// every number replaced by a marker, and what each marker replaced.
// Booleans and nulls are kept: templates test them, and a marker would
// turn every such test true; so are the values at the paths of keep and
// under them (the values a template tests in a condition, `if
// .Values.tag` as much as `if eq .Values.kind "Deployment"`). An empty
// string no condition tests is marked, so a field that renders it through
// `default` (`.Values.image.tag | default .Chart.AppVersion`) is traced to it.
func Mark(vals map[string]any, keep ...[]string) (map[string]any, *Marks) {
	m := &Marks{keep: keep}
	out, _ := m.mark(vals, nil).(map[string]any)
	return out, m
}

// Refused notes that some values were kept unmarked (passed to Mark in
// keep) because the chart refuses a marker in them (a number given to
// until, a version to semverCompare); why names them and the chart's
// error, and each field no marker reached then says it.
func (m *Marks) Refused(why string) { m.refused = why }

// Units are the places a marked tree can keep unmarked (Mark's keep), in
// marking order, each once: a mark's path up to its first list index (a
// list is kept whole).
func (m *Marks) Units() [][]string {
	var out [][]string
	seen := map[string]bool{}
	for _, at := range m.at {
		var unit []string
		for _, s := range at {
			k, ok := s.(string)
			if !ok {
				break
			}
			unit = append(unit, k)
		}
		key := strings.Join(unit, "\x00")
		if len(unit) == 0 || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, unit)
	}
	return out
}

// Unmark replaces, in s (a render error of the marked values, say), each
// marker with the path of the value it stands for, ‹image.tag›: no marker
// text reaches a person, and no value either (it may be a secret).
func (m *Marks) Unmark(s string) string {
	if m == nil {
		return s
	}
	return markerRE.ReplaceAllStringFunc(s, func(mark string) string {
		n, err := strconv.Atoi(markerRE.FindStringSubmatch(mark)[1])
		if err != nil || n < 0 || n >= len(m.at) {
			return "‹a value›"
		}
		return "‹" + PathString(m.at[n]) + "›"
	})
}

func (m *Marks) mark(v any, at []Step) any {
	if len(m.keep) > 0 && m.kept(at) {
		return v
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			key := k
			if holeKey.MatchString(k) {
				// a key conditional probing put in an empty map: marked
				// itself, so that the text a template makes of it is read
				// back as a key
				key = m.newMark(append(at[:len(at):len(at)], KeyOf(k)), k)
			}
			out[key] = m.mark(t[k], append(at[:len(at):len(at)], k))
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = m.mark(e, append(at[:len(at):len(at)], i))
		}
		return out
	case string, nil:
		// an empty string or null is marked too (a tag under `default
		// .Chart.AppVersion`, a registry a helper defaults, is then
		// traced) unless a condition or a range tests it: those are kept
		// above
	case int, int64, float64, int32, uint64, float32, uint, uint32:
	default:
		return v
	}
	return m.newMark(at, v)
}

// newMark records a mark of v at at and returns its marker.
func (m *Marks) newMark(at []Step, v any) string {
	n := len(m.orig)
	m.at = append(m.at, append([]Step(nil), at...))
	m.orig = append(m.orig, v)
	return markPrefix + strconv.Itoa(n) + markSuffix
}

// KeyOf is a step that stands for the key k of a map itself, not its
// value: where a key that conditional probing put in a map was marked.
type KeyOf string

// holeKey matches the keys conditional probing puts in a map (holeKeyOf).
var holeKey = regexp.MustCompile(`^zqk[0-9]+kqz$`)

// holeKeyOf is the i-th key conditional probing puts in a map, and
// hole the string it puts where a value must be found.
func holeKeyOf(i int) string { return "zqk" + strconv.Itoa(i) + "kqz" }

const hole = "zqhole"

// PathString is a place in the values as a person writes it:
// web.image.tag, args[1], a["b.c"].
func PathString(at []Step) string {
	var b strings.Builder
	for _, s := range at {
		switch k := s.(type) {
		case KeyOf:
			fmt.Fprintf(&b, "‹the key %s›", string(k)) // never shown: conditional probing renames it
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		case string:
			if b.Len() == 0 {
				b.WriteString(values.FormatPath([]string{k}))
			} else if f := values.FormatPath([]string{k}); strings.HasPrefix(f, "[") {
				b.WriteString(f)
			} else {
				b.WriteString("." + f)
			}
		}
	}
	return b.String()
}

// Unit is the part of at a rule can name: its map keys up to the first
// list (a rule decides a list as a whole).
func Unit(at []Step) []string {
	var keys []string
	for _, s := range at {
		k, ok := s.(string)
		if !ok {
			break
		}
		keys = append(keys, k)
	}
	return keys
}

// UnitValue is the value a rule on Unit(at) must give so that the value at
// at becomes v: v itself, or, under a list, a copy of the list in vals
// with that one element replaced.
func UnitValue(vals map[string]any, at []Step, v any) any {
	unit := Unit(at)
	if len(unit) == len(at) {
		return v
	}
	whole, _ := values.Lookup(vals, unit)
	return setIn(values.DeepCopy(whole), at[len(unit):], v)
}

func setIn(tree any, at []Step, v any) any {
	if len(at) == 0 {
		return v
	}
	switch k := at[0].(type) {
	case int:
		l, ok := tree.([]any)
		if !ok || k >= len(l) {
			return tree
		}
		l[k] = setIn(l[k], at[1:], v)
		return l
	case string:
		m, ok := tree.(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		m[k] = setIn(m[k], at[1:], v)
		return m
	}
	return tree
}
