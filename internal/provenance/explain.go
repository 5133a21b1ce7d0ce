package provenance

import (
	"encoding/base64"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Assignment is one value a field is made of, and the value it must have
// for the chart to render the live field.
type Assignment struct {
	At   []Step `json:"-"`
	Path string `json:"path"` // PathString(At)
	// Value is what the value must be for the chart to render the live
	// field; Was is what it is; Changed says they differ.
	Value   any  `json:"value"`
	Was     any  `json:"was"`
	Changed bool `json:"changed"`
}

// Source is where a field comes from: the values it is made of, or why
// none.
type Source struct {
	Assignments []Assignment `json:"assignments,omitempty"`
	// Reason says why no value maps ("" when some does).
	Reason string `json:"reason,omitempty"`
	// Note says how the field was read back, when not directly (base64;
	// a block the chart renders whole from a value).
	Note string `json:"note,omitempty"`
}

// Mapped reports whether values render the field.
func (s Source) Mapped() bool { return s.Reason == "" && len(s.Assignments) > 0 }

// Paths are the value paths, comma-separated.
func (s Source) Paths() string {
	p := make([]string, len(s.Assignments))
	for i, a := range s.Assignments {
		p[i] = a.Path
	}
	return strings.Join(p, ", ")
}

// Explain says which values render the field at steps (concrete: map keys
// and list indices, resolved against the real render) of the object id,
// and, when live is set, what they must be for the chart to render live.
func (m *Map) Explain(id ObjectID, steps []Step, live any, liveSet bool) Source {
	t := m.find(id)
	switch {
	case t == nil:
		return Source{Reason: ReasonNoObject}
	case m.failed != "":
		return Source{Reason: m.failed}
	case t.marked == nil:
		return Source{Reason: ReasonCondition}
	}
	rv, rok := At(t.real, steps)
	mv, mok := At(t.marked, steps)
	if !rok {
		return m.underSubtree(t, steps, live, liveSet)
	}
	if !mok {
		return Source{Reason: ReasonCondition}
	}
	if src, ok := m.explainValue(mv, rv, live, liveSet); ok {
		return src
	}
	if reflect.DeepEqual(values.Normalize(mv), values.Normalize(rv)) {
		if m.marks.refused != "" {
			return Source{Reason: ReasonNoValue + "; " + m.marks.refused}
		}
		return Source{Reason: ReasonNoValue}
	}
	return Source{Reason: ReasonTransformed}
}

// explainValue says which values render a field whose marked render is
// mv and real render rv, and what they must be for live; ok false when
// no marker reaches it.
func (m *Map) explainValue(mv, rv, live any, liveSet bool) (Source, bool) {
	switch v := mv.(type) {
	case string:
		return m.explainText(v, rv, live, liveSet)
	case map[string]any:
		if at, ok := m.subtree(v); ok {
			src := Source{Note: "a block the chart renders whole from " + PathString(at) + " (toYaml)"}
			src.Assignments = []Assignment{m.assign(at, live, liveSet)}
			return src, true
		}
	case []any:
		if at, ok := m.sublist(v); ok {
			return Source{Assignments: []Assignment{m.assign(at, live, liveSet)}}, true
		}
	default:
		return Source{}, false
	}
	// a map or list made of values and literal text: read value by value
	if !liveSet {
		return Source{}, false
	}
	if as, ok := m.readBack(mv, rv, live); ok && len(as) > 0 {
		return Source{Assignments: as, Note: NoteByValue}, true
	}
	return Source{}, false
}

// The notes of a field read through a transform.
const (
	NoteByValue = "read back value by value"
	NoteBase64  = "base64 (b64enc) of the value"
	NoteUpper   = "upper of the value"
	NoteYAML    = "the text read back as YAML (toYaml, toJson of the values)"
)

// explainText is explainValue of a field the marked render writes as the
// text v: a value whole, values with literal text around them (fit),
// the same base64-encoded (b64enc) or upper-cased (upper), or a YAML or
// JSON document of values (toYaml, toJson) read back as one.
func (m *Map) explainText(v string, rv, live any, liveSet bool) (Source, bool) {
	if parts := split(v); hasMark(parts) {
		if len(parts) == 1 {
			return m.whole(parts[0].mark, live, liveSet), true
		}
		// a list joined, elements added or dropped (a fit would put the
		// separator inside an element)
		if joined, ok := m.explainJoin(parts, live, liveSet); ok {
			return joined, true
		}
		src := m.fit(parts, rv, live, liveSet, "")
		if src.Reason != "" {
			// a YAML or JSON document of values, keys added or dropped
			if doc, ok := m.explainDocument(v, rv, live, liveSet); ok {
				return doc, true
			}
		}
		return src, true
	}
	if decoded, err := base64.StdEncoding.DecodeString(v); err == nil {
		if parts := split(string(decoded)); hasMark(parts) {
			lv, ok := live.(string)
			var dl []byte
			if ok {
				dl, ok = decodeB64(lv)
			}
			var real any
			if rs, isText := rv.(string); isText {
				if dr, ok := decodeB64(rs); ok {
					real = string(dr)
				}
			}
			if len(parts) == 1 {
				src := m.whole(parts[0].mark, string(dl), liveSet && ok)
				src.Note = NoteBase64
				return src, true
			}
			return m.fit(parts, real, string(dl), liveSet && ok, NoteBase64), true
		}
	}
	if lower := strings.ToLower(v); lower != v {
		if parts := split(lower); hasMark(parts) {
			// upper: the marker upper-cased; the live text is read in
			// lower case, and the render check keeps only a value whose
			// upper case is the live text
			lv, ok := live.(string)
			real, _ := rv.(string)
			return m.fit(parts, strings.ToLower(real), strings.ToLower(lv), liveSet && ok, NoteUpper), true
		}
	}
	return Source{}, false
}

// NoteJoin says a field was read back as a list joined (join, or a range
// writing a separator between elements).
const NoteJoin = "a list joined with a separator, split back"

// explainJoin reads a text that joins the whole of one values list with a
// separator (`{{ join "," .Values.hosts }}`: the elements' markers in
// order, the same text between each two) back as that list: the live
// text between the same text before and after, split at the separator.
// A list of fewer than two elements shows no separator: none; nor when
// the live text splits into as many elements (then each is read as it is).
func (m *Map) explainJoin(parts []part, live any, liveSet bool) (Source, bool) {
	lv, ok := live.(string)
	if !ok || !liveSet {
		return Source{}, false
	}
	var list []Step
	var sep, before, after string
	n := 0
	for i, p := range parts {
		if p.mark < 0 {
			switch {
			case n == 0:
				before = p.lit
			case i == len(parts)-1:
				after = p.lit
			case sep == "":
				sep = p.lit
			case p.lit != sep:
				return Source{}, false
			}
			continue
		}
		at := m.marks.at[p.mark]
		if len(at) == 0 || at[len(at)-1] != Step(n) {
			return Source{}, false
		}
		if list == nil {
			list = at[:len(at)-1]
		} else if PathString(list) != PathString(at[:len(at)-1]) {
			return Source{}, false
		}
		if i > 0 && parts[i-1].mark >= 0 {
			return Source{}, false // two markers with nothing between
		}
		n++
	}
	orig, _ := At(m.values, list)
	ol, isList := orig.([]any)
	if n < 2 || sep == "" || !isList || len(ol) != n ||
		len(lv) < len(before)+len(after) || !strings.HasPrefix(lv, before) || !strings.HasSuffix(lv, after) {
		return Source{}, false
	}
	elems := []any{}
	if middle := lv[len(before) : len(lv)-len(after)]; middle != "" {
		for _, e := range strings.Split(middle, sep) {
			elems = append(elems, coerce(e, ol[0]))
		}
	}
	if len(elems) == n {
		return Source{}, false // as many elements: each is read as it is (fit)
	}
	return Source{Assignments: []Assignment{m.assign(list, elems, true)}, Note: NoteJoin}, true
}

// documentAt is the field at steps of id read as a YAML or JSON document
// (explainDocument), when its marked render is text.
func (m *Map) documentAt(id ObjectID, steps []Step, live any) (Source, bool) {
	t := m.find(id)
	if t == nil || t.marked == nil || m.failed != "" {
		return Source{}, false
	}
	mv, _ := At(t.marked, steps)
	rv, _ := At(t.real, steps)
	if v, ok := mv.(string); ok {
		return m.explainDocument(v, rv, live, true)
	}
	return Source{}, false
}

// explainDocument reads a text of values written as a YAML or JSON
// document (a ConfigMap key from toYaml of a map) back as one: the marked
// text and the live one parsed, and the live document read value by
// value, a block rendered whole from a value taken whole.
func (m *Map) explainDocument(v string, rv, live any, liveSet bool) (Source, bool) {
	lv, ok := live.(string)
	if !ok || !liveSet || !strings.ContainsAny(v, "\n{[") {
		return Source{}, false
	}
	var mdoc, rdoc, ldoc any
	if yaml.Unmarshal([]byte(v), &mdoc) != nil || yaml.Unmarshal([]byte(lv), &ldoc) != nil {
		return Source{}, false
	}
	if rs, ok := rv.(string); ok {
		_ = yaml.Unmarshal([]byte(rs), &rdoc)
	}
	switch mdoc.(type) {
	case map[string]any, []any:
	default:
		return Source{}, false
	}
	src, ok := m.explainValue(mdoc, rdoc, ldoc, true)
	if !ok || !src.Mapped() {
		return Source{}, false
	}
	src.Note = NoteYAML
	return src, true
}

func decodeB64(s string) ([]byte, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}

// whole is a field that is one value, nothing around it.
func (m *Map) whole(n int, live any, liveSet bool) Source {
	v := live
	if s, ok := live.(string); ok && liveSet {
		v = coerce(s, m.marks.orig[n])
	}
	return Source{Assignments: []Assignment{m.assign(m.marks.at[n], v, liveSet)}}
}

func (m *Map) assign(at []Step, v any, set bool) Assignment {
	was, _ := At(m.values, at)
	a := Assignment{At: at, Path: PathString(at), Was: was, Value: was}
	if set {
		a.Value = v
		a.Changed = !reflect.DeepEqual(values.Normalize(v), values.Normalize(was))
	}
	return a
}

// underSubtree maps a field the real render lacks (one the live object
// added) to a value when an ancestor is a block rendered whole from a
// value map: the field is that map's key of the same name.
func (m *Map) underSubtree(t *traced, steps []Step, live any, liveSet bool) Source {
	for k := len(steps) - 1; k >= 1; k-- {
		node, ok := At(t.marked, steps[:k])
		mp, isMap := node.(map[string]any)
		if !ok || !isMap {
			continue
		}
		at, ok := m.subtree(mp)
		if !ok {
			// the map may also hold keys the template writes itself, or
			// leave keys of the value out (omit): its keys from values are
			// one value map's keys of the same name
			if at, ok = m.keysOf(mp); !ok {
				continue
			}
		}
		full := append(append([]Step(nil), at...), steps[k:]...)
		for _, s := range steps[k:] {
			if _, isKey := s.(string); !isKey {
				return Source{Reason: ReasonNotRendered}
			}
		}
		return Source{Note: "a block the chart renders whole from " + PathString(at) + " (toYaml)", Assignments: []Assignment{m.assign(full, live, liveSet)}}
	}
	return Source{Reason: ReasonNotRendered}
}

// subtree is the value map a rendered map is the whole of (toYaml of it):
// its keys are the value's keys, and each traced child is the value's
// child of the same name.
func (m *Map) subtree(node map[string]any) ([]Step, bool) {
	var at []Step
	for rk, c := range node {
		k := m.marks.keyOf(rk)
		var child []Step
		switch v := c.(type) {
		case string:
			parts := split(v)
			if len(parts) != 1 || parts[0].mark < 0 {
				continue
			}
			child = m.marks.at[parts[0].mark]
		case map[string]any:
			var ok bool
			if child, ok = m.subtree(v); !ok {
				continue
			}
		default:
			continue
		}
		if len(child) == 0 || child[len(child)-1] != Step(k) {
			return nil, false
		}
		parent := child[:len(child)-1]
		if at != nil && PathString(at) != PathString(parent) {
			return nil, false
		}
		at = parent
	}
	if at == nil {
		return nil, false
	}
	v, ok := At(m.values, at)
	vm, isMap := v.(map[string]any)
	if !ok || !isMap || len(vm) != len(node) {
		return nil, false
	}
	for k := range node {
		if _, ok := vm[m.marks.keyOf(k)]; !ok {
			return nil, false
		}
	}
	return at, true
}

// keysOf is the value map whose keys a rendered map's marked keys are:
// each marked child of node is that map's child of the same name (other
// children the template writes itself), and node holds all that map's
// keys but one at most.
func (m *Map) keysOf(node map[string]any) ([]Step, bool) {
	var at []Step
	for rk, c := range node {
		s, ok := c.(string)
		if !ok {
			continue
		}
		parts := split(s)
		if len(parts) != 1 || parts[0].mark < 0 {
			continue
		}
		child := m.marks.at[parts[0].mark]
		if len(child) == 0 || child[len(child)-1] != Step(m.marks.keyOf(rk)) {
			return nil, false
		}
		if at != nil && PathString(at) != PathString(child[:len(child)-1]) {
			return nil, false
		}
		at = child[:len(child)-1]
	}
	if at == nil {
		return nil, false
	}
	// and the map holds that value map's keys, but for one it may leave
	// out (omit .Values.livenessProbe "enabled")
	v, _ := At(m.values, at)
	vm, isMap := v.(map[string]any)
	if !isMap {
		return nil, false
	}
	missing := 0
	for k := range vm {
		if _, ok := node[k]; !ok {
			missing++
		}
	}
	return at, missing <= 1
}

// sublist is the value list a rendered list is the whole of (toJson or
// toYaml of it): each element the value's element at the same index.
func (m *Map) sublist(node []any) ([]Step, bool) {
	var at []Step
	for i, e := range node {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		parts := split(s)
		if len(parts) != 1 || parts[0].mark < 0 {
			return nil, false
		}
		el := m.marks.at[parts[0].mark]
		if len(el) == 0 || el[len(el)-1] != Step(i) || (at != nil && PathString(at) != PathString(el[:len(el)-1])) {
			return nil, false
		}
		at = el[:len(el)-1]
	}
	if at == nil {
		return nil, false
	}
	v, _ := At(m.values, at)
	if l, ok := v.([]any); !ok || len(l) != len(node) {
		return nil, false
	}
	return at, true
}

// At is the value at steps (map keys and list indices) of v, and whether
// v has one there.
func At(v any, steps []Step) (any, bool) {
	for _, s := range steps {
		switch k := s.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			l, ok := v.([]any)
			if !ok || k < 0 || k >= len(l) {
				return nil, false
			}
			v = l[k]
		default:
			return nil, false
		}
	}
	return v, true
}
