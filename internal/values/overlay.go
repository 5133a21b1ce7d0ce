package values

import (
	"fmt"
	"sort"
)

// WarnOverriddenByConfig: a value the merge decided is set again by an
// overlay the target's controller applies after the user values (a k3s
// HelmChartConfig), so the overlay's value is the one deployed.
const WarnOverriddenByConfig WarningKind = "overridden-by-config"

// Overlay returns base with over laid on top, as Helm combines two values
// files: maps are merged key by key, anything else in over replaces what
// base holds. Neither input is changed.
func Overlay(base, over map[string]any) map[string]any {
	out, _ := DeepCopy(base).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = Overlay(bm, vm)
				continue
			}
		}
		out[k] = DeepCopy(v)
	}
	return out
}

// Shadowed lists the paths of merged that over sets again: each leaf of
// over (a scalar, a list or an empty map) found in merged, or under a
// scalar of merged that the overlay's map replaces. from names the
// overlay in the messages, which never quote a value.
func Shadowed(merged, over map[string]any, from string) []Warning {
	var out []Warning
	var walk func(m, o map[string]any, keys []string)
	walk = func(m, o map[string]any, keys []string) {
		names := make([]string, 0, len(o))
		for k := range o {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			path := append(append([]string(nil), keys...), k)
			mv, ok := m[k]
			if !ok {
				continue
			}
			om, oIsMap := o[k].(map[string]any)
			mm, mIsMap := mv.(map[string]any)
			if oIsMap && mIsMap && len(om) > 0 {
				walk(mm, om, path)
				continue
			}
			same := "a different value"
			if equal(mv, o[k]) {
				same = "the same value"
			}
			out = append(out, Warning{Kind: WarnOverriddenByConfig, Path: FormatPath(path),
				Message: fmt.Sprintf("%s sets %s here and is applied after these values: its value is the one deployed", from, same)})
		}
	}
	walk(merged, over, nil)
	return out
}
