package chart

import (
	"errors"
	"fmt"

	chartvalues "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Defaults returns the default values Helm renders c with when the user sets
// nothing: the chart's values.yaml coalesced with those of every subchart
// under charts/, at any depth, each under its name (or alias) in its parent,
// globals copied down, and import-values applied. Subcharts count whatever
// their condition or tags say, so the defaults of an optional subchart are
// there for a user who enables it.
//
// The result is a fresh normalised tree: changing it never changes c.
func Defaults(c *chart.Chart) (map[string]any, error) {
	d, _, err := combined(c, false)
	return d, err
}

// DefaultsAndKeys returns Defaults, and its keys: Defaults with the keys
// the charts set to null kept, as Helm's MergeValues keeps them
// (CoalesceValues drops them: a null default means "unset"), every key
// the chart and its subcharts declare. A user value at such a key
// (longhorn's defaultSettings.defaultDataPath: ~) is one the chart reads,
// not an orphan. A map the templates render whole (toYaml, range, tpl:
// passedThrough) is an empty map in keys, open to any key below it. The chart is copied and its dependencies processed once
// for both.
func DefaultsAndKeys(c *chart.Chart) (defaults, keys map[string]any, err error) {
	return combined(c, true)
}

// combined is c's values and its subcharts', every subchart enabled,
// coalesced as Helm coalesces them, and, withKeys, merged keeping nulls.
func combined(c *chart.Chart, withKeys bool) (defaults, keys map[string]any, err error) {
	if c == nil || c.Metadata == nil {
		return nil, nil, outcome.BadInput(errors.New("computing chart defaults: no chart"))
	}
	cp := clone(c)
	enableAll(cp)
	if err := chartutil.ProcessDependencies(cp, map[string]any{}); err != nil {
		return nil, nil, outcome.BadInput(fmt.Errorf("computing the defaults of chart %s: %w", nameVersion(c), err))
	}
	vals, err := chartvalues.CoalesceValues(cp, map[string]any{})
	if err != nil {
		return nil, nil, outcome.BadInput(fmt.Errorf("computing the defaults of chart %s: %w", nameVersion(c), err))
	}
	if withKeys {
		merged, err := chartvalues.MergeValues(cp, map[string]any{})
		if err != nil {
			return nil, nil, outcome.BadInput(fmt.Errorf("computing the keys of chart %s: %w", nameVersion(c), err))
		}
		keys = normalized(merged)
		for _, p := range passedThrough(cp) {
			openKey(keys, p)
		}
	}
	return normalized(vals), keys, nil
}

// enableAll drops the conditions and tags of every dependency of c, so Helm's
// dependency processing keeps all subcharts.
func enableAll(c *chart.Chart) {
	for _, d := range c.Metadata.Dependencies {
		if d != nil {
			d.Condition = ""
			d.Tags = nil
		}
	}
	for _, sub := range c.Dependencies() {
		enableAll(sub)
	}
}

// nameVersion names a chart in messages: "harvester-1.4.0".
func nameVersion(c *chart.Chart) string {
	if c == nil || c.Metadata == nil {
		return "<none>"
	}
	return c.Metadata.Name + "-" + c.Metadata.Version
}

// openKey empties the map at path in keys, if there is one: every key
// below it is one the chart reads.
func openKey(keys map[string]any, path []string) {
	m := keys
	for i, k := range path {
		v, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		if i == len(path)-1 {
			m[k] = map[string]any{}
			return
		}
		m = v
	}
}
