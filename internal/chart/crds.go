package chart

import (
	"fmt"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// CRDs are the files of c's crds/ folder and of those of the subcharts
// userValues enable, in Helm's order: as Helm's install reads them, after
// processing the chart's dependencies with the values. Each one's
// Filename is the chart's path to it (demo/charts/sub/crds/a.yaml).
func CRDs(c *chart.Chart, userValues map[string]any) ([]chart.CRD, error) {
	cp := clone(c)
	vals := copyMap(userValues)
	if vals == nil {
		vals = map[string]any{}
	}
	if err := chartutil.ProcessDependencies(cp, vals); err != nil {
		return nil, outcome.Refused(fmt.Errorf("processing the dependencies of chart %s with the merged values: %w", nameVersion(c), err))
	}
	return cp.CRDObjects(), nil
}
