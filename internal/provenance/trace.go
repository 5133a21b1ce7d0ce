package provenance

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Why a field maps to no value.
const (
	// ReasonNoValue: the rendered field holds no marker and reads the same
	// in both renders: the template writes it literally, or from a boolean
	// or a value a condition tests, which are not traced.
	ReasonNoValue = "no value renders it: the template writes it literally, or from a boolean or a value a condition tests (those are not traced)"
	// ReasonTransformed: the field changes with the values but holds no
	// marker: a value reaches it through a condition that picks a literal
	// (if eq …), or a function or arithmetic that changes its text
	// (upper, sha256sum, int, add, printf "%d"…).
	ReasonTransformed = "a value reaches it through a condition, or a function or arithmetic that changes its text (if eq, upper, sha256sum, int, add, printf…), so it cannot be read back"
	// ReasonCondition: the object or field renders differently when the
	// values are traced: it sits under a condition on a value (if, eq,
	// with, range over a string).
	ReasonCondition = "it is rendered under a condition on a value (if, eq, with…), which tracing changes"
	// ReasonNotRendered: the deployed revision does not render the field
	// and no block the chart renders whole from a value holds it.
	ReasonNotRendered = "no value renders it: the chart does not render this field"
	// ReasonNoObject: the chart does not render the object.
	ReasonNoObject = "the chart does not render this object"
	// ReasonNoFit: the live value does not keep the text the template
	// writes around the value(s).
	ReasonNoFit = "the live value does not keep the text the template writes around the value"
)

// Doc is one rendered object: the template it came from (Helm's
// "# Source:") and its YAML.
type Doc struct {
	Source, Content string
}

// ObjectID names an object of a render; Namespace "" matches any.
type ObjectID struct {
	Kind, Namespace, Name string
}

// Map is a chart's render traced to its values: for each rendered object,
// its real render and its marked one.
type Map struct {
	objects []traced
	marks   *Marks
	values  map[string]any
	// failed is why nothing can be traced ("": tracing worked).
	failed string
	// render checks answers (CheckWith); checked are its renders, by
	// the values rendered.
	render  Renderer
	checked map[string][]parsed
}

type traced struct {
	id     ObjectID
	real   map[string]any
	marked map[string]any // nil: the marked render has no such object
}

// Failed is a Map that traces nothing, every field giving why.
func Failed(real []Doc, why string) (*Map, error) {
	m := &Map{failed: why}
	objs, err := parse(real)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		m.objects = append(m.objects, traced{id: o.id, real: o.obj})
	}
	return m, nil
}

// Trace pairs the objects of the real render with those of the marked one
// (rendered from the values Mark gave), by template and order within it.
// vals are the effective values the marks were made from.
func Trace(real, marked []Doc, marks *Marks, vals map[string]any) (*Map, error) {
	r, err := parse(real)
	if err != nil {
		return nil, fmt.Errorf("the render: %w", err)
	}
	mk, err := parse(marked)
	if err != nil {
		return nil, fmt.Errorf("the traced render: %w", err)
	}
	bySource := map[string][]parsed{}
	for _, o := range mk {
		bySource[o.source] = append(bySource[o.source], o)
	}
	count := map[string]int{}
	for _, o := range r {
		count[o.source]++
	}
	m := &Map{marks: marks, values: vals}
	seen := map[string]int{}
	for _, o := range r {
		t := traced{id: o.id, real: o.obj}
		if peers := bySource[o.source]; len(peers) == count[o.source] {
			t.marked = peers[seen[o.source]].obj
		}
		seen[o.source]++
		m.objects = append(m.objects, t)
	}
	return m, nil
}

type parsed struct {
	source string
	id     ObjectID
	obj    map[string]any
}

func parse(docs []Doc) ([]parsed, error) {
	var out []parsed
	for _, d := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(d.Content), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Source, err)
		}
		if obj == nil {
			continue
		}
		kind, _ := obj["kind"].(string)
		md, _ := obj["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		out = append(out, parsed{source: d.Source, id: ObjectID{Kind: kind, Namespace: ns, Name: name}, obj: obj})
	}
	return out, nil
}

// Object is the real render of an object; nil when the chart does not
// render it.
func (m *Map) Object(id ObjectID) map[string]any {
	if t := m.find(id); t != nil {
		return t.real
	}
	return nil
}

func (m *Map) find(id ObjectID) *traced {
	for i := range m.objects {
		t := &m.objects[i]
		if t.id.Kind == id.Kind && t.id.Name == id.Name &&
			(t.id.Namespace == "" || id.Namespace == "" || t.id.Namespace == id.Namespace) {
			return t
		}
	}
	return nil
}

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
	rv, rok := get(t.real, steps)
	mv, mok := get(t.marked, steps)
	if !rok {
		return m.underSubtree(t, steps, live, liveSet)
	}
	if !mok {
		return Source{Reason: ReasonCondition}
	}
	switch v := mv.(type) {
	case string:
		if parts := split(v); hasMark(parts) {
			if len(parts) == 1 {
				return m.whole(parts[0].mark, live, liveSet)
			}
			return m.fit(parts, live, liveSet, "")
		}
		if decoded, err := base64.StdEncoding.DecodeString(v); err == nil {
			if parts := split(string(decoded)); hasMark(parts) {
				lv, ok := live.(string)
				var dl []byte
				if ok {
					dl, ok = decodeB64(lv)
				}
				return m.fit(parts, string(dl), liveSet && ok, "base64 (b64enc) of the value")
			}
		}
	case map[string]any:
		if at, ok := m.subtree(v); ok {
			src := Source{Note: "a block the chart renders whole from " + PathString(at) + " (toYaml)"}
			src.Assignments = []Assignment{m.assign(at, live, liveSet)}
			return src
		}
	case []any:
		if at, ok := m.sublist(v); ok {
			return Source{Assignments: []Assignment{m.assign(at, live, liveSet)}}
		}
	}
	if reflect.DeepEqual(values.Normalize(mv), values.Normalize(rv)) {
		if m.marks.stringsOnly != "" {
			return Source{Reason: ReasonNoValue + "; numbers are not traced in this chart: " + m.marks.stringsOnly}
		}
		return Source{Reason: ReasonNoValue}
	}
	return Source{Reason: ReasonTransformed}
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
	was, _ := get(m.values, at)
	a := Assignment{At: at, Path: PathString(at), Was: was, Value: was}
	if set {
		a.Value = v
		a.Changed = !reflect.DeepEqual(values.Normalize(v), values.Normalize(was))
	}
	return a
}

// fit splits a live string along the literal text of the template; of
// several splits, the one that changes the fewest values.
func (m *Map) fit(parts []part, live any, liveSet bool, note string) Source {
	src := Source{Note: note}
	if !liveSet {
		for _, p := range parts {
			if p.mark >= 0 {
				src.Assignments = append(src.Assignments, m.assign(m.marks.at[p.mark], nil, false))
			}
		}
		return src
	}
	s, ok := live.(string)
	if !ok {
		b, _ := json.Marshal(live)
		s = string(b)
	}
	var best []string
	bestChanged := -1
	matchParts(parts, s, nil, func(pieces []string) bool {
		changed, i := 0, 0
		for _, p := range parts {
			if p.mark < 0 {
				continue
			}
			if text(coerce(pieces[i], m.marks.orig[p.mark])) != text(m.marks.orig[p.mark]) {
				changed++
			}
			i++
		}
		if bestChanged < 0 || changed < bestChanged {
			best, bestChanged = append([]string(nil), pieces...), changed
		}
		return changed > 0
	})
	if best == nil {
		return Source{Reason: ReasonNoFit + " (" + literals(parts) + ")", Note: note}
	}
	i := 0
	for _, p := range parts {
		if p.mark < 0 {
			continue
		}
		src.Assignments = append(src.Assignments, m.assign(m.marks.at[p.mark], coerce(best[i], m.marks.orig[p.mark]), true))
		i++
	}
	return src
}

// underSubtree maps a field the real render lacks (one the live object
// added) to a value when an ancestor is a block rendered whole from a
// value map: the field is that map's key of the same name.
func (m *Map) underSubtree(t *traced, steps []Step, live any, liveSet bool) Source {
	for k := len(steps) - 1; k >= 1; k-- {
		node, ok := get(t.marked, steps[:k])
		mp, isMap := node.(map[string]any)
		if !ok || !isMap {
			continue
		}
		at, ok := m.subtree(mp)
		if !ok {
			continue
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
	for k, c := range node {
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
	v, ok := get(m.values, at)
	vm, isMap := v.(map[string]any)
	if !ok || !isMap || len(vm) != len(node) {
		return nil, false
	}
	for k := range node {
		if _, ok := vm[k]; !ok {
			return nil, false
		}
	}
	return at, true
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
	v, _ := get(m.values, at)
	if l, ok := v.([]any); !ok || len(l) != len(node) {
		return nil, false
	}
	return at, true
}

// part is a literal text (mark -1) or a marker.
type part struct {
	lit  string
	mark int
}

func split(s string) []part {
	var out []part
	last := 0
	for _, loc := range markerRE.FindAllStringSubmatchIndex(s, -1) {
		if loc[0] > last {
			out = append(out, part{lit: s[last:loc[0]], mark: -1})
		}
		n, _ := strconv.Atoi(s[loc[2]:loc[3]])
		out = append(out, part{mark: n})
		last = loc[1]
	}
	if last < len(s) {
		out = append(out, part{lit: s[last:], mark: -1})
	}
	return out
}

func hasMark(parts []part) bool {
	for _, p := range parts {
		if p.mark >= 0 {
			return true
		}
	}
	return false
}

func literals(parts []part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.mark >= 0 {
			b.WriteString("…")
		} else {
			b.WriteString(strconv.Quote(p.lit))
		}
	}
	return b.String()
}

// maxSplits bounds the splits tried of one live string.
const maxSplits = 256

// matchParts calls found with each way s splits along parts (the pieces
// the markers take), until found returns false or maxSplits were tried.
func matchParts(parts []part, s string, pieces []string, found func([]string) bool) {
	tries := 0
	var walk func(i int, s string, pieces []string) bool
	walk = func(i int, s string, pieces []string) bool {
		if i == len(parts) {
			if s != "" {
				return true
			}
			tries++
			return found(pieces) && tries < maxSplits
		}
		p := parts[i]
		if p.mark < 0 {
			if !strings.HasPrefix(s, p.lit) {
				return true
			}
			return walk(i+1, s[len(p.lit):], pieces)
		}
		if i+1 == len(parts) {
			return walk(i+1, "", append(pieces, s))
		}
		for end := 0; end <= len(s); end++ {
			if next := parts[i+1]; next.mark < 0 && !strings.HasPrefix(s[end:], next.lit) {
				continue
			}
			if !walk(i+1, s[end:], append(pieces[:len(pieces):len(pieces)], s[:end])) {
				return false
			}
		}
		return true
	}
	walk(0, s, pieces)
}

// text is a value as a template prints it.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(values.Normalize(v))
}

// coerce reads piece as the type of the value it replaces: a number stays
// a number when it reads as one; a string that toYaml quoted (`"true"`,
// `'%(protocol)s'`: text YAML would read as another type or that starts
// with a special character) is read unquoted, as toYaml will quote it
// again.
func coerce(piece string, orig any) any {
	switch orig.(type) {
	case string:
		if n := len(piece); n >= 2 && (piece[0] == '"' && piece[n-1] == '"' || piece[0] == '\'' && piece[n-1] == '\'') {
			var s string
			if err := yaml.Unmarshal([]byte(piece), &s); err == nil {
				return s
			}
		}
		return piece
	case nil, bool:
		return piece
	}
	if i, err := strconv.ParseInt(piece, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(piece, 64); err == nil {
		return f
	}
	return piece
}

func get(v any, steps []Step) (any, bool) {
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
