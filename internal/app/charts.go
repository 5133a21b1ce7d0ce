package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// chartSource is a chart source seen through the core's port, its charts
// rendered by r (for the cluster of the run, or offline).
type chartSource struct {
	chartpkg.Source
	r chartpkg.Renderer
}

// openSource opens a directory of charts or a Helm repository URL whose
// charts r renders.
func openSource(ref, caFile string, r chartpkg.Renderer) (upgrade.ChartSource, error) {
	src, err := chartpkg.NewSource(ref, chartpkg.SourceOptions{CAFile: caFile})
	if err != nil {
		return nil, err
	}
	return chartSource{Source: src, r: r}, nil
}

func (s chartSource) Load(ctx context.Context, name, version string) (*upgrade.Chart, error) {
	c, err := s.Source.Load(ctx, name, version)
	if err != nil {
		return nil, err
	}
	return describe(c, s.r)
}

// describe is what the core needs of a loaded chart: its defaults, the
// templates that regenerate data, and a check that renders it (with r).
func describe(c *chart.Chart, r chartpkg.Renderer) (*upgrade.Chart, error) {
	d, keys, err := chartpkg.DefaultsAndKeys(c)
	if err != nil {
		return nil, err
	}
	last := &lastRender{}
	return &upgrade.Chart{Name: c.Name(), Version: c.Metadata.Version, Defaults: d, Keys: keys,
		RegeneratedData: chartpkg.RegeneratedData(c),
		Archive:         func() ([]byte, error) { return chartpkg.Archive(c) },
		Check:           func(v map[string]any) error { return r.Check(c, v) },
		Manifest: func(v map[string]any, name, namespace string) (string, error) {
			objects, _, err := last.rendered(r, c, v, name, namespace)
			return objects, err
		},
		WithHooks: func(v map[string]any, name, namespace string) (string, error) {
			objects, hooks, err := last.rendered(r, c, v, name, namespace)
			return objects + hooks, err
		},
		Trace: func(v map[string]any, name, namespace string) (*provenance.Map, error) {
			return r.Trace(c, v, name, namespace)
		},
		CRDFiles: func(v map[string]any) ([]upgrade.CRDFile, error) {
			files, err := chartpkg.CRDs(c, v)
			out := make([]upgrade.CRDFile, len(files))
			for i, f := range files {
				out[i] = upgrade.CRDFile{Path: f.Filename, Data: f.File.Data}
			}
			return out, err
		}}, nil
}

// lastRender is a chart's last render, for the checks of one preflight
// that render it with the same values (the conflict check's objects, the
// image check's objects and hooks): one render instead of two.
type lastRender struct {
	mu             sync.Mutex
	key            string
	objects, hooks string
	err            error
}

// rendered is r's render of c with v as release name in namespace, the
// last one again when it was made with equal arguments.
func (l *lastRender) rendered(r chartpkg.Renderer, c *chart.Chart, v map[string]any, name, namespace string) (string, string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return r.Rendered(c, v, name, namespace)
	}
	sum := sha256.Sum256(data)
	key := name + "/" + namespace + "/" + hex.EncodeToString(sum[:])
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.key != key {
		l.objects, l.hooks, l.err = r.Rendered(c, v, name, namespace)
		l.key = key
	}
	return l.objects, l.hooks, l.err
}

// chartHolder is a target adapter that holds charts itself (docs/design.md
// §4.3): the chart its release deploys now, kept in Helm's storage, and the
// chart source its object names (a HelmChart's spec.repo or
// spec.chartContent). Adapters implement it without importing it.
type chartHolder interface {
	// DeployedChart is the chart the target deploys now, as its release
	// stores it; nil when there is no release.
	DeployedChart(ctx context.Context) (*chart.Chart, error)
	// OwnSource is the chart source the target object names; nil when it
	// names none.
	OwnSource(ctx context.Context) (chartpkg.Source, error)
}

// targetSource is the chart source of a job on t: the spec's (or
// --chart-source) when given, else the one the target names; and, for a
// target that holds its deployed chart, that chart for the deployed
// version whenever the source does not serve it (so the old defaults never
// depend on a repository still serving an old version).
func targetSource(ctx context.Context, t upgrade.Target, spec upgrade.ChartSource, r chartpkg.Renderer) (upgrade.ChartSource, error) {
	h, ok := t.(chartHolder)
	if !ok {
		if spec == nil {
			return nil, outcome.BadInput(fmt.Errorf("%s: no chart source: give chart.source in the spec (or --chart-source)", t.Ref()))
		}
		return spec, nil
	}
	src := spec
	if src == nil {
		own, err := h.OwnSource(ctx)
		if err != nil {
			return nil, err
		}
		if own == nil {
			return nil, outcome.BadInput(fmt.Errorf("%s: no chart source: the target names none, give chart.source in the spec (or --chart-source)", t.Ref()))
		}
		src = chartSource{Source: own, r: r}
	}
	return heldSource{src: src, h: h, r: r}, nil
}

// heldSource is a chart source backed, for the deployed version, by the
// chart the target holds.
type heldSource struct {
	src upgrade.ChartSource
	h   chartHolder
	r   chartpkg.Renderer
}

func (s heldSource) Load(ctx context.Context, name, version string) (*upgrade.Chart, error) {
	c, err := s.src.Load(ctx, name, version)
	if err == nil {
		return c, nil
	}
	d, derr := s.h.DeployedChart(ctx)
	if derr != nil {
		return nil, errors.Join(err, fmt.Errorf("reading the deployed chart: %w", derr))
	}
	if d != nil && d.Metadata != nil && d.Name() == name &&
		strings.TrimPrefix(d.Metadata.Version, "v") == strings.TrimPrefix(version, "v") {
		if lacking := withoutSubcharts(d); lacking != "" {
			return nil, errors.Join(err, outcome.BadInput(fmt.Errorf("the release record holds %s, as Helm stores it: the chart source must serve that version", lacking)))
		}
		return describe(d, s.r)
	}
	return nil, err
}

// withoutSubcharts names a chart held without the subcharts its
// Chart.yaml lists (Helm's release record keeps none): "chart web 1.0.0
// without its subcharts (a, b)"; "" when it holds them all.
func withoutSubcharts(c *chart.Chart) string {
	missing := chartpkg.MissingDependencies(c)
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("chart %s %s without its subcharts (%s)", c.Name(), c.Metadata.Version, strings.Join(missing, ", "))
}

func (s heldSource) Versions(ctx context.Context, name string) ([]string, error) {
	return s.src.Versions(ctx, name)
}

func (s heldSource) String() string { return s.src.String() }
