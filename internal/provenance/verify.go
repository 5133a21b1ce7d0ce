package provenance

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Renderer renders the chart a Map traces, with vals as its values (the
// effective values, some changed): what a reading's answer is checked
// with.
type Renderer func(vals map[string]any) ([]Doc, error)

// CheckWith makes every reading that changes a value check its answer: the
// chart is rendered with the values changed as the reading says, and the
// answer stands only when the field then renders the live value (else the
// reading gives ReasonRendersOther). The other fields of the chart's
// objects that the same change changes are listed (Reading.AlsoChanges).
func (m *Map) CheckWith(r Renderer) { m.render = r }

// ReasonRendersOther: setting the values the live field was read back to
// does not render the live field (a block scalar's chomping, an escape or a
// function between the value and the field changes it).
const ReasonRendersOther = "setting the value it was read back to does not render the live value (a block scalar's trailing newline, an escape or a function changes it), so it cannot be kept by a value"

// MaxAlso is how many other changed fields a reading lists.
const MaxAlso = 10

// check renders the chart with r's adopted values and says whether the
// field at steps of id then reads live, and which other fields changed.
func (m *Map) check(r Reading, id ObjectID, steps []Step, live any) (ok bool, also []string, err error) {
	vals := values.DeepCopy(m.values).(map[string]any)
	for _, a := range r.Adopt {
		vals, _ = setIn(vals, StepsOf(a.Keys), a.Value).(map[string]any)
	}
	key := fmt.Sprint(vals)
	c, cached := m.checked[key]
	if !cached {
		docs, err := m.render(vals)
		if err != nil {
			return false, nil, err
		}
		objs, err := parse(docs)
		if err != nil {
			return false, nil, err
		}
		c = objs
		if m.checked == nil {
			m.checked = map[string][]parsed{}
		}
		m.checked[key] = c
	}
	var got any
	for _, o := range c {
		if o.id.Kind == id.Kind && o.id.Name == id.Name && (id.Namespace == "" || o.id.Namespace == "" || o.id.Namespace == id.Namespace) {
			got, _ = At(o.obj, steps)
			break
		}
	}
	if !renders(got, live) {
		return false, nil, nil
	}
	// the other fields the change changes, by object; not those a render
	// makes anew each time (a certificate generated on every render)
	regenerated := m.regenerated()
	m.changedFields(c, func(o parsed, at []Step, field string) {
		self := o.id.Kind == id.Kind && o.id.Name == id.Name && (id.Namespace == "" || o.id.Namespace == "" || o.id.Namespace == id.Namespace)
		if (self && startsWith(at, steps)) || regenerated[field] {
			return
		}
		also = append(also, field)
	})
	slices.Sort(also)
	if len(also) > MaxAlso {
		also = append(also[:MaxAlso], fmt.Sprintf("and %d more", len(also)-MaxAlso))
	}
	return true, also, nil
}

func startsWith(at, prefix []Step) bool {
	return len(at) >= len(prefix) && reflect.DeepEqual(at[:len(prefix)], prefix)
}

// diffLeaves calls changed with the path of each leaf that differs
// between a and b (a map or list present on one side only is one leaf).
func diffLeaves(a, b any, at []Step, changed func([]Step)) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			diffLeaves(am[k], bm[k], append(at[:len(at):len(at)], k), changed)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			diffLeaves(al[i], bl[i], append(at[:len(at):len(at)], i), changed)
		}
		return
	}
	if !values.Equal(a, b) {
		changed(append([]Step(nil), at...))
	}
}

// FieldString is a field of an object as a person reads it:
// .spec.template.spec.containers[0].image, a key with dots bracketed.
func FieldString(at []Step) string { return "." + PathString(at) }

// regenerated are the fields that differ between the real render and
// one more render with the same values: those the chart generates anew
// on every render (genCA, randAlphaNum), which no value changes. Rendered
// once per Map.
func (m *Map) regenerated() map[string]bool {
	if m.regen != nil {
		return m.regen
	}
	m.regen = map[string]bool{}
	docs, err := m.render(values.DeepCopy(m.values).(map[string]any))
	if err != nil {
		return m.regen
	}
	objs, err := parse(docs)
	if err != nil {
		return m.regen
	}
	m.changedFields(objs, func(_ parsed, _ []Step, field string) { m.regen[field] = true })
	return m.regen
}

// changedFields calls changed with each leaf of objs (a render) that
// differs from the real render, and its name for people: `Kind name
// .field`; an object the real render does not hold (a namespace or a
// name changed) once, at no field: `Kind namespace/name (a new object)`.
func (m *Map) changedFields(objs []parsed, changed func(o parsed, at []Step, field string)) {
	for _, o := range objs {
		var before map[string]any
		if t := m.find(o.id); t != nil {
			before = t.real
		} else {
			name := o.id.Name
			if o.id.Namespace != "" {
				name = o.id.Namespace + "/" + name
			}
			changed(o, nil, o.id.Kind+" "+name+" (a new object)")
			continue
		}
		diffLeaves(before, o.obj, nil, func(at []Step) { changed(o, at, o.id.Kind+" "+o.id.Name+" "+FieldString(at)) })
	}
}
