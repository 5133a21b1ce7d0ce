package helmchart

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"helm.sh/helm/v4/pkg/strvals"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// UserValues are the values the HelmChart itself gives Helm, combined as
// klipper-helm passes them: spec.valuesContent, then spec.values (two
// values files, in that order), then spec.set as helm-controller's args
// turn it into flags (Helm applies every --set, then every --set-string).
// A valuesContent that is not a YAML map, or a set entry Helm cannot
// parse, is bad input naming the field.
func UserValues(h *HelmChart) (map[string]any, error) {
	out := map[string]any{}
	if strings.TrimSpace(h.ValuesContent) != "" {
		m, err := values.Parse([]byte(h.ValuesContent))
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("%s spec.valuesContent: %w", h.Ref(), err))
		}
		out = m
	}
	if len(h.Values) > 0 {
		out = values.Overlay(out, h.Values)
	}
	if err := applySet(out, h.Set); err != nil {
		return nil, outcome.BadInput(fmt.Errorf("%s %w", h.Ref(), err))
	}
	n, _ := values.Normalize(out).(map[string]any)
	if n == nil {
		n = map[string]any{}
	}
	return n, nil
}

// applySet applies set entries to dest as Helm applies helm-controller's
// flags: the typed ones (--set) first, then the strings (--set-string).
func applySet(dest map[string]any, set []SetEntry) error {
	for _, typed := range []bool{true, false} {
		for _, e := range set {
			flag, arg := setArg(e)
			if (flag == "--set") != typed {
				continue
			}
			parse := strvals.ParseInto
			if !typed {
				parse = strvals.ParseIntoString
			}
			if err := parse(arg, dest); err != nil {
				return fmt.Errorf("spec.set[%q]: Helm cannot parse %s %s: %w", e.Key, flag, e.Key+"=…", err)
			}
		}
	}
	return nil
}

// commaRE is helm-controller's: a run of backslashes ending in a comma.
var commaRE = regexp.MustCompile(`\\*,`)

// setArg is the flag and argument helm-controller's args() makes of one
// set entry: --set for an integer or true/false/null, else --set-string
// with every unescaped comma escaped.
func setArg(e SetEntry) (flag, arg string) {
	switch v := e.Value.(type) {
	case int64:
		return "--set", fmt.Sprintf("%s=%d", e.Key, v)
	case string:
		switch strings.ToLower(v) {
		case "true", "false", "null":
			return "--set", e.Key + "=" + v
		}
		return "--set-string", e.Key + "=" + commaRE.ReplaceAllStringFunc(v, func(m string) string {
			if len(m)%2 == 1 {
				return `\` + m
			}
			return m
		})
	}
	return "--set-string", fmt.Sprintf("%s=%v", e.Key, e.Value)
}

// SetFate is what a write-back did with one spec.set entry.
type SetFate string

// The fates of a set entry.
const (
	SetKept      SetFate = "kept"      // the merge kept its value
	SetRewritten SetFate = "rewritten" // the merge decided another value, still a set entry
	SetDropped   SetFate = "dropped"   // the merge removed the value
	SetFolded    SetFate = "folded"    // its value moved into valuesContent
)

// SetNote says what became of one set entry, for the log and the report.
type SetNote struct {
	Key  string
	Fate SetFate
	Why  string
}

// Written is the HelmChart's part of an apply: what spec.valuesContent and
// spec.set become (spec.values is folded into valuesContent and removed).
type Written struct {
	ValuesContent string
	Set           []SetEntry
	Notes         []SetNote
}

// WriteBack splits the merged values u between spec.valuesContent and
// spec.set (docs/helmchart.md#values). A set entry keeps its place, and
// so its precedence over a HelmChartConfig, whenever the merged value can
// still be written as one: kept when unchanged, rewritten when the merge
// decided another scalar, dropped when the merge removed it. It is folded
// into valuesContent when its key reaches into a list or sets more than
// one value, or when the merged value is no longer a scalar set can carry
// as it is (a map or list, a fraction, an integer beyond 32 bits, a string
// Helm would read as a boolean or null). valuesContent holds the rest of
// u, so that UserValues of the result is u again.
func WriteBack(u map[string]any, set []SetEntry) (Written, error) {
	rest, _ := values.Normalize(u).(map[string]any)
	if rest == nil {
		rest = map[string]any{}
	}
	var w Written
	for _, e := range set {
		keys, ok := simpleSetPath(e)
		if !ok {
			w.Notes = append(w.Notes, SetNote{Key: e.Key, Fate: SetFolded, Why: "its key reaches into a list or sets more than one value"})
			continue
		}
		v, found := values.Lookup(u, keys)
		if !found {
			w.Notes = append(w.Notes, SetNote{Key: e.Key, Fate: SetDropped, Why: "the merge removed the value"})
			continue
		}
		nv, ok := setValue(v)
		if !ok {
			w.Notes = append(w.Notes, SetNote{Key: e.Key, Fate: SetFolded, Why: "the merged value is not a scalar a set entry carries as it is"})
			continue
		}
		remove(rest, keys)
		if nv == e.Value {
			w.Set = append(w.Set, e)
			w.Notes = append(w.Notes, SetNote{Key: e.Key, Fate: SetKept})
			continue
		}
		w.Set = append(w.Set, SetEntry{Key: e.Key, Value: nv})
		w.Notes = append(w.Notes, SetNote{Key: e.Key, Fate: SetRewritten, Why: "the merge decided another value"})
	}
	if len(rest) > 0 {
		b, err := values.Marshal(rest)
		if err != nil {
			return Written{}, err
		}
		w.ValuesContent = string(b)
	}
	return w, nil
}

// simpleSetPath is the path one set entry sets when it sets exactly one
// value through maps only.
func simpleSetPath(e SetEntry) ([]string, bool) {
	m := map[string]any{}
	if err := applySet(m, []SetEntry{e}); err != nil {
		return nil, false
	}
	var keys []string
	cur := any(m)
	for {
		mm, isMap := cur.(map[string]any)
		if !isMap {
			break
		}
		if len(mm) != 1 {
			return nil, false
		}
		for k, v := range mm {
			keys, cur = append(keys, k), v
		}
	}
	if _, isList := cur.([]any); isList {
		return nil, false
	}
	return keys, len(keys) > 0
}

// setValue is the set entry value that gives v back through
// helm-controller's flags; false when there is none.
func setValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return "null", true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		if x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		return x, true
	case string:
		switch strings.ToLower(x) {
		case "true", "false", "null":
			return nil, false
		}
		return x, true
	}
	return nil, false
}

// remove deletes the value at keys, and the maps it leaves empty.
func remove(m map[string]any, keys []string) {
	if len(keys) == 1 {
		delete(m, keys[0])
		return
	}
	child, ok := m[keys[0]].(map[string]any)
	if !ok {
		return
	}
	remove(child, keys[1:])
	if len(child) == 0 {
		delete(m, keys[0])
	}
}

// ConfigValues are the values a HelmChartConfig lays over the HelmChart's,
// combined as klipper-helm reads them: its valuesContent, then its
// values. (Its valuesSecrets are read by the client.)
func ConfigValues(c *HelmChartConfig) (map[string]any, error) {
	out := map[string]any{}
	if strings.TrimSpace(c.ValuesContent) != "" {
		m, err := values.Parse([]byte(c.ValuesContent))
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("helmchartconfig %s/%s spec.valuesContent: %w", c.Namespace, c.Name, err))
		}
		out = m
	}
	if len(c.Values) > 0 {
		out = values.Overlay(out, c.Values)
	}
	return out, nil
}
