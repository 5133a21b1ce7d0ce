package values

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"

	"sigs.k8s.io/yaml"
)

// Parse reads a values document the way Helm reads a values file (YAML 1.1,
// JSON-compatible) and returns it as a map with normalised numbers. An empty
// or null document is an empty map; anything but a map is an error.
func Parse(data []byte) (map[string]any, error) {
	var v any
	err := yaml.Unmarshal(data, &v, func(d *json.Decoder) *json.Decoder { d.UseNumber(); return d })
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	v = normalize(v)
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("values must be a map, not %s", typeName(v))
	}
}

// Normalize converts a decoded value tree to the types the merge works with:
// map[string]any, []any, string, bool, int64, float64 and nil. Integral
// numbers become int64, so 1 (JSON) and 1 (YAML) compare equal.
func Normalize(v any) any { return normalize(v) }

func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, err := x.Float64()
		if err != nil {
			return string(x)
		}
		return normalizeFloat(f)
	case float64:
		return normalizeFloat(x)
	case float32:
		return normalizeFloat(float64(x))
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
		return float64(x)
	default:
		return v
	}
}

func normalizeFloat(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// typeName names the kind of a value for messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case int64, float64:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// equal compares two normalised values; numbers compare by value.
func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		if x, xok := number(a); xok {
			y, yok := number(b)
			return yok && x == y
		}
		return a == b
	}
}

// Lookup returns the value at keys of a value tree and whether it is set.
func Lookup(m map[string]any, keys []string) (any, bool) { return lookup(m, keys) }

// lookup returns the value at keys and whether it is set.
func lookup(m map[string]any, keys []string) (any, bool) {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// setPath writes v at keys, creating maps on the way (a non-map in the way is
// replaced).
func setPath(m map[string]any, keys []string, v any) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

// DeepCopy copies a value tree: its maps (a map type of string keys
// becomes map[string]any, as Helm's Values do) and lists are new, its
// leaves shared (they are immutable); a nil map or list stays nil. The one
// deep copy of values in the repository.
func DeepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = DeepCopy(e)
		}
		return out
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = DeepCopy(e)
		}
		return out
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String && !rv.IsNil() &&
		rv.Type().Elem().Kind() == reflect.Interface {
		out := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			out[it.Key().String()] = DeepCopy(it.Value().Interface())
		}
		return out
	}
	return v
}

// Equal says whether two value trees are the same, numbers by their
// value (80 from YAML and 80 from JSON), whatever Go types hold them
// (Normalize). The one comparison of values in the repository.
func Equal(a, b any) bool { return equal(normalize(a), normalize(b)) }

// coalesce returns what Helm renders with at one node: the user's value over
// the default, maps merged key by key, a user null deleting the default.
func coalesce(u any, uSet bool, d any, dSet bool) (any, bool) {
	if !uSet {
		return d, dSet
	}
	if u == nil {
		return nil, false
	}
	um, uok := u.(map[string]any)
	dm, dok := d.(map[string]any)
	if !uok || !dSet || !dok {
		return u, true
	}
	out := make(map[string]any, len(dm)+len(um))
	for k, dv := range dm {
		out[k] = dv
	}
	for k, uv := range um {
		dv, dset := dm[k]
		if v, ok := coalesce(uv, true, dv, dset); ok {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	return out, true
}

// Marshal renders values as canonical YAML: keys sorted, stable formatting.
// The same values always give the same bytes.
func Marshal(v map[string]any) ([]byte, error) {
	if v == nil {
		v = map[string]any{}
	}
	out, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding values: %w", err)
	}
	return out, nil
}

// Hash is the hex sha256 of the canonical YAML of the values, the bytes
// `merge -o yaml` prints.
func Hash(v map[string]any) (string, error) {
	b, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return hashBytes(b), nil
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// sortedKeys returns the keys of the maps, merged and sorted.
func sortedKeys(maps ...map[string]any) []string {
	n := 0
	for _, m := range maps {
		n += len(m)
	}
	seen := make(map[string]struct{}, n)
	keys := make([]string, 0, n)
	for _, m := range maps {
		for k := range m {
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// Format renders a value compactly for reports: scalars plainly, maps and
// lists as compact JSON, cut at max runes.
func Format(v any, max int) string {
	var s string
	switch x := v.(type) {
	case nil:
		s = "null"
	case string:
		s = strconv.Quote(x)
		if plainScalar(x) {
			s = x
		}
	case bool, int64, float64:
		s = fmt.Sprint(x)
	default:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			s = fmt.Sprint(v)
		} else {
			s = string(bytes.TrimSpace(b.Bytes()))
		}
	}
	if r := []rune(s); max > 0 && len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// plainScalar reports whether a string reads unambiguously without quotes.
func plainScalar(s string) bool {
	if s == "" || s == "null" || s == "true" || s == "false" || s == "-" {
		return false
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '…' {
			return false
		}
	}
	return true
}
