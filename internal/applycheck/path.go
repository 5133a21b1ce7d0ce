package applycheck

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Path is a field path as the API server prints it in a conflict:
// .spec.template.spec.containers[name="web"].image. Its elements are a
// field (.name), a list element by its keys ([name="web",port=80]), by
// its value ([="x"]) or by its index ([2]).
type Path []element

type element struct {
	field string         // .field
	keys  map[string]any // [k="v",…]
	value any            // [=v]
	byVal bool
	index int // [i]; -1 when not an index
}

// ParsePath parses a printed field path.
func ParsePath(s string) (Path, error) {
	var p Path
	for i := 0; i < len(s); {
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("field path %q: an empty field at %d", s, i)
			}
			p = append(p, element{field: s[i+1 : j], index: -1})
			i = j
		case '[':
			j, inQuote := i+1, false
			for ; j < len(s); j++ {
				if s[j] == '\\' && inQuote {
					j++
					continue
				}
				if s[j] == '"' {
					inQuote = !inQuote
				}
				if s[j] == ']' && !inQuote {
					break
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("field path %q: an unclosed [ at %d", s, i)
			}
			e, err := parseSelector(s[i+1 : j])
			if err != nil {
				return nil, fmt.Errorf("field path %q: %w", s, err)
			}
			p = append(p, e)
			i = j + 1
		default:
			return nil, fmt.Errorf("field path %q: want . or [ at %d", s, i)
		}
	}
	return p, nil
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

// parseSelector reads the inside of [...].
func parseSelector(s string) (element, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return element{index: n}, nil
	}
	if strings.HasPrefix(s, "=") {
		var v any
		if err := json.Unmarshal([]byte(s[1:]), &v); err != nil {
			return element{}, fmt.Errorf("a value selector [%s]: %w", s, err)
		}
		return element{value: v, byVal: true, index: -1}, nil
	}
	// k1=v1,k2=v2 with JSON values: read it as a JSON object
	var b strings.Builder
	b.WriteByte('{')
	rest := s
	for first := true; rest != ""; first = false {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return element{}, fmt.Errorf("a key selector [%s]: want key=value", s)
		}
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(rest[:eq]))
		b.WriteByte(':')
		rest = rest[eq+1:]
		dec := json.NewDecoder(strings.NewReader(rest))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return element{}, fmt.Errorf("a key selector [%s]: %w", s, err)
		}
		b.Write(v)
		rest = strings.TrimPrefix(strings.TrimSpace(rest[dec.InputOffset():]), ",")
	}
	b.WriteByte('}')
	keys := map[string]any{}
	if err := json.Unmarshal([]byte(b.String()), &keys); err != nil {
		return element{}, fmt.Errorf("a key selector [%s]: %w", s, err)
	}
	return element{keys: keys, index: -1}, nil
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

// matches says whether list item i is the one e selects. Numbers compare
// by value, whatever their Go type.
func (e element) matches(i int, item any) bool {
	switch {
	case e.index >= 0:
		return i == e.index
	case e.byVal:
		return sameValue(item, e.value)
	}
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range e.keys {
		if !sameValue(m[k], v) {
			return false
		}
	}
	return true
}

// sameValue compares JSON values, numbers by their value (values.Normalize:
// 80 from YAML and 80 from JSON are the same).
func sameValue(a, b any) bool {
	return reflect.DeepEqual(values.Normalize(a), values.Normalize(b))
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
