package app

import (
	"context"

	"helm.sh/helm/v3/pkg/chart"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// chartSource is a chart source seen through the core's port.
type chartSource struct{ chartpkg.Source }

// openSource opens a directory of charts or a Helm repository URL.
func openSource(ref, caFile string) (upgrade.ChartSource, error) {
	src, err := chartpkg.NewSource(ref, chartpkg.SourceOptions{CAFile: caFile})
	if err != nil {
		return nil, err
	}
	return chartSource{src}, nil
}

func (s chartSource) Load(ctx context.Context, name, version string) (*upgrade.Chart, error) {
	c, err := s.Source.Load(ctx, name, version)
	if err != nil {
		return nil, err
	}
	return describe(c)
}

// describe is what the core needs of a loaded chart: its defaults, the
// templates that regenerate data, and a check that renders it.
func describe(c *chart.Chart) (*upgrade.Chart, error) {
	d, err := chartpkg.Defaults(c)
	if err != nil {
		return nil, err
	}
	return &upgrade.Chart{Name: c.Name(), Version: c.Metadata.Version, Defaults: d,
		RegeneratedData: chartpkg.RegeneratedData(c),
		Check:           func(v map[string]any) error { return chartpkg.Check(c, v) }}, nil
}
