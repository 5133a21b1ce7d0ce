package provenance

import (
	"maps"
	"slices"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// readBack reads the live value lv of a field back through its marked
// render mv (real render rv), value by value: a scalar as Explain reads
// it, a block rendered whole from a value (toYaml of it) taken whole,
// a map key by key and a list element by element. Text or a number the
// template writes literally must be live as the chart renders it. Keys
// the live map holds that the render does not are left to the render
// check (the API server adds some: a port's protocol). ok is false when
// the live value does not keep what the template writes, or two places
// want one value different.
func (m *Map) readBack(mv, rv, lv any) ([]Assignment, bool) {
	var out []Assignment
	var walk func(mv, rv, lv any) bool
	walk = func(mv, rv, lv any) bool {
		switch v := mv.(type) {
		case map[string]any:
			lm, ok := lv.(map[string]any)
			if !ok {
				return false
			}
			if at, ok := m.subtree(v); ok && !sameKeys(v, lm, m.marks) {
				// a block rendered whole from a value, keys added or
				// dropped: the value is the live block
				out = append(out, m.assign(at, lv, true))
				return true
			}
			rm, _ := rv.(map[string]any)
			for _, k := range slices.Sorted(maps.Keys(v)) {
				l, ok := lm[k]
				if !ok || !walk(v[k], rm[k], l) {
					return false
				}
			}
			return true
		case []any:
			if at, ok := m.sublist(v); ok {
				if _, isList := lv.([]any); !isList {
					return false
				}
				out = append(out, m.assign(at, lv, true))
				return true
			}
			ll, ok := lv.([]any)
			if !ok || len(ll) != len(v) {
				return false
			}
			rl, _ := rv.([]any)
			for i := range v {
				var r any
				if i < len(rl) {
					r = rl[i]
				}
				if !walk(v[i], r, ll[i]) {
					return false
				}
			}
			return true
		case string:
			if src, ok := m.explainText(v, rv, lv, true); ok {
				if !src.Mapped() {
					return false
				}
				out = append(out, src.Assignments...)
				return true
			}
		}
		return values.Equal(rv, lv)
	}
	if !walk(mv, rv, lv) {
		return nil, false
	}
	return mergeAssignments(out)
}

// sameKeys says whether the live map lm has the keys of the marked map
// mv (each as the values name it), and no other.
func sameKeys(mv, lm map[string]any, marks *Marks) bool {
	if len(mv) != len(lm) {
		return false
	}
	for k := range mv {
		if _, ok := lm[marks.keyOf(k)]; !ok {
			return false
		}
	}
	return true
}

// mergeAssignments keeps one assignment of each path; two that want one
// value different are no answer.
func mergeAssignments(as []Assignment) ([]Assignment, bool) {
	var out []Assignment
	seen := map[string]int{}
	for _, a := range as {
		if i, ok := seen[a.Path]; ok {
			if !values.Equal(out[i].Value, a.Value) {
				return nil, false
			}
			continue
		}
		seen[a.Path] = len(out)
		out = append(out, a)
	}
	return out, true
}

// renders says whether got, a field as the chart renders it, is the
// live value: equal, or for a map or a list, each of its keys and
// elements so, in order (the live one may hold keys the API server
// added: a port's protocol).
func renders(got, live any) bool {
	switch g := got.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, gv := range g {
			lv, ok := l[k]
			if !ok && gv != nil || ok && !renders(gv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(g) {
			return false
		}
		for i := range g {
			if !renders(g[i], l[i]) {
				return false
			}
		}
		return true
	}
	return values.Equal(got, live)
}

// keyOf is the key of the values a rendered map key stands for: the key
// conditional probing put in a map when k is that key's marker, else k.
func (m *Marks) keyOf(k string) string {
	parts := split(k)
	if len(parts) != 1 || parts[0].mark < 0 {
		return k
	}
	at := m.at[parts[0].mark]
	if len(at) > 0 {
		if key, ok := at[len(at)-1].(KeyOf); ok {
			return string(key)
		}
	}
	return k
}
