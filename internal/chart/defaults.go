package chart

import (
	"fmt"

	helmchart "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
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
	return combined(c, "defaults", chartvalues.CoalesceValues)
}

// Keys returns Defaults with the keys the charts set to null kept, as
// Helm's MergeValues keeps them (CoalesceValues drops them: a null default
// means "unset"): every key the chart and its subcharts declare. A user
// value at such a key (longhorn's defaultSettings.defaultDataPath: ~) is
// one the chart reads, not an orphan.
func Keys(c *chart.Chart) (map[string]any, error) {
	return combined(c, "keys", chartvalues.MergeValues)
}

// combined is c's values and its subcharts', every subchart enabled,
// combined by combine (one of Helm's).
func combined(c *chart.Chart, what string, combine func(helmchart.Charter, map[string]any) (common.Values, error)) (map[string]any, error) {
	if c == nil || c.Metadata == nil {
		return nil, outcome.BadInput(fmt.Errorf("computing chart %s: no chart", what))
	}
	cp := clone(c)
	enableAll(cp)
	if err := chartutil.ProcessDependencies(cp, map[string]any{}); err != nil {
		return nil, outcome.BadInput(fmt.Errorf("computing the %s of chart %s: %w", what, nameVersion(c), err))
	}
	vals, err := combine(cp, map[string]any{})
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("computing the %s of chart %s: %w", what, nameVersion(c), err))
	}
	return normalized(vals), nil
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
