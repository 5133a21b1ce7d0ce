package values

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// compareValues orders two values for the max and min policies: numbers by
// value, and strings or numbers as Kubernetes quantities ("500m", "1Gi").
// ok is false when they are not comparable.
func compareValues(a, b any) (cmp int, ok bool) {
	if x, y, isNum := bothNumbers(a, b); isNum {
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		default:
			return 0, true
		}
	}
	qa, okA := quantity(a)
	qb, okB := quantity(b)
	if !okA || !okB {
		return 0, false
	}
	return qa.Cmp(qb), true
}

func bothNumbers(a, b any) (float64, float64, bool) {
	x, okA := number(a)
	y, okB := number(b)
	return x, y, okA && okB
}

// number returns a numeric value of any Go number type as a float64 (the
// defaults of a chart may come from callers that did not normalise them).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int16:
		return float64(n), true
	case int8:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint8:
		return float64(n), true
	case float32:
		return float64(n), true
	}
	return 0, false
}

func quantity(v any) (resource.Quantity, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64, float64, int, int32, int16, int8, uint, uint64, uint32, uint16, uint8, float32:
		s = fmt.Sprint(x)
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, false
	}
	return q, true
}
