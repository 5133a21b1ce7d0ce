package provenance

import (
	"fmt"

	"sigs.k8s.io/yaml"
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
	// probed counts the renders probes allowed (probe.go).
	probed int
	// fallbacks are the texts templates write for an empty value
	// (FallsBackTo).
	fallbacks []fallback
	// regen are the fields each render makes anew (regenerated).
	regen map[string]bool
	// tests are the values the chart's conditions test, retrace traces
	// the chart with some set otherwise, retraces are those traces by
	// candidate, and budgetSpent says MaxRetraces stopped one
	// (condition.go).
	tests       []Tested
	tested      func() []Tested
	retrace     Retracer
	retraces    map[string]*Map
	budgetSpent bool
}

type traced struct {
	id     ObjectID
	real   map[string]any
	marked map[string]any // nil: the marked render has no such object
}

// Failed is a Map that traces nothing, every field giving why, of the
// chart rendered with vals (its effective values): with CheckWith, a
// field may still be read back by rendering (probe.go).
func Failed(real []Doc, why string, vals map[string]any) (*Map, error) {
	m := &Map{failed: why, values: vals}
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
