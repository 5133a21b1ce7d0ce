package applycheck

import (
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Path is a field path of a field set (pathOf), to find a field in an
// object as JSON decodes it. Its elements are a field, a list element by
// its keys ([name="web",port=80] as the API server prints it), by its
// value ([="x"]) or by its index ([2]). It is never parsed from the
// printed form: a key may hold a dot (eks.amazonaws.com/role-arn).
type Path []element

type element struct {
	field string         // .field
	keys  map[string]any // [k="v",…]
	value any            // [=v]
	byVal bool
	index int // [i]; -1 when not an index
	// lenient: a key the item lacks is not compared (Path.lenient)
	lenient bool
}

// pathOf is a structured field path (a field set's) as a Path.
func pathOf(fp fieldpath.Path) Path {
	p := make(Path, len(fp))
	for i, pe := range fp {
		e := element{index: -1}
		switch {
		case pe.FieldName != nil:
			e.field = *pe.FieldName
		case pe.Key != nil:
			e.keys = map[string]any{}
			for _, f := range *pe.Key {
				e.keys[f.Name] = f.Value.Unstructured()
			}
		case pe.Value != nil:
			e.value, e.byVal = (*pe.Value).Unstructured(), true
		case pe.Index != nil:
			e.index = *pe.Index
		}
		p[i] = e
	}
	return p
}

// Lookup is the value at p in obj (an object as JSON decodes it); ok is
// false when there is none.
func (p Path) Lookup(obj map[string]any) (any, bool) {
	var cur any = obj
	for _, e := range p {
		switch {
		case e.field != "":
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[e.field]; !ok {
				return nil, false
			}
		default:
			list, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			found := false
			for i, item := range list {
				if e.matches(i, item) {
					cur, found = item, true
					break
				}
			}
			if !found {
				return nil, false
			}
		}
	}
	return cur, true
}

// lenient is p with each list element chosen by the keys an item has:
// a key the item lacks (a port's protocol the chart leaves to its
// default, which the field set's path carries) is not compared.
func (p Path) lenient() Path {
	out := make(Path, len(p))
	for i, e := range p {
		e.lenient = e.keys != nil
		out[i] = e
	}
	return out
}

// matches says whether list item i is the one e selects. Numbers compare
// by value, whatever their Go type.
func (e element) matches(i int, item any) bool {
	switch {
	case e.index >= 0:
		return i == e.index
	case e.byVal:
		return values.Equal(item, e.value)
	}
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range e.keys {
		mv, has := m[k]
		if !has && e.lenient {
			continue
		}
		if !values.Equal(mv, v) {
			return false
		}
	}
	return true
}

// Steps resolves p in obj to concrete steps: a field name (string) or a
// list index (int) each. When obj lacks a part of p, ok is false and the
// steps go as far as obj has them, then name the fields p goes on with
// (up to its next list element, which obj cannot place).
func (p Path) Steps(obj map[string]any) (steps []any, ok bool) {
	var cur any = obj
	missing := false
	for _, e := range p {
		if e.field != "" {
			steps = append(steps, e.field)
			if !missing {
				m, isMap := cur.(map[string]any)
				if cur, ok = m[e.field]; !isMap || !ok {
					missing = true
				}
			}
			continue
		}
		if missing {
			return steps, false
		}
		list, _ := cur.([]any)
		found := false
		for i, item := range list {
			if e.matches(i, item) {
				steps, cur, found = append(steps, i), item, true
				break
			}
		}
		if !found {
			return steps, false
		}
	}
	return steps, !missing
}
