package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
)

func TestPlanChartsRefusesMixedFlags(t *testing.T) {
	specFile := filepath.Join(t.TempDir(), "spec.yaml") // never read
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"--spec and --target", Options{SpecFile: specFile, Target: "x/y/z"}, "give --spec or --target, not both"},
		{"--spec and --set", Options{SpecFile: specFile, Explicit: Explicit{Set: []string{"a=1"}}},
			"--policy, -f, the --set flags, --chart-source and --crds go with --target; with --spec, put rules in the spec (and apply.crds)"},
		{"--spec and -f", Options{SpecFile: specFile, Explicit: Explicit{Files: []string{"v.yaml"}}},
			"--policy, -f, the --set flags, --chart-source and --crds go with --target; with --spec, put rules in the spec (and apply.crds)"},
		{"--spec and --policy", Options{SpecFile: specFile, PolicyFile: "p.yaml"},
			"--policy, -f, the --set flags, --chart-source and --crds go with --target; with --spec, put rules in the spec (and apply.crds)"},
		{"--spec and --chart-source", Options{SpecFile: specFile, ChartSource: "./charts"},
			"--policy, -f, the --set flags, --chart-source and --crds go with --target; with --spec, put rules in the spec (and apply.crds)"},
		{"--set alone", Options{Explicit: Explicit{Set: []string{"a=1"}}}, "--policy, -f, the --set flags, --chart-source and --crds need --target"},
		{"--chart-source alone", Options{ChartSource: "./charts"}, "--policy, -f, the --set flags, --chart-source and --crds need --target"},
		{"--spec and --crds", Options{SpecFile: specFile, CRDs: "create", CRDsSet: true},
			"--policy, -f, the --set flags, --chart-source and --crds go with --target; with --spec, put rules in the spec (and apply.crds)"},
		{"--crds-migrate alone", Options{MigrateCRDs: true}, "--policy, -f, the --set flags, --chart-source and --crds need --target"},
		{"--crds of another word", Options{Target: "release/ns/r", ChartSource: "./charts", CRDs: "replace", CRDsSet: true},
			`--crds: want skip, create, createReplace, not "replace"`},
		{"--crds-migrate without createReplace", Options{Target: "release/ns/r", ChartSource: "./charts", CRDs: "skip", CRDsSet: true, MigrateCRDs: true},
			`--crds-migrate needs --crds createReplace (a migration is part of replacing a CRD), not "skip"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			charts, file, err := planCharts(&o)
			require.Error(t, err)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.Equal(t, tc.want, err.Error())
			assert.Nil(t, charts)
			assert.Equal(t, "", file)
		})
	}
}

func TestPlanChartsUnderSUCNeedsTheSpecSecret(t *testing.T) {
	// nothing mounted
	o := Options{SecretsDir: filepath.Join(t.TempDir(), "secrets"), Log: slog.New(slog.DiscardHandler)}
	_, _, err := planCharts(&o)
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), "nothing to upgrade: give --spec FILE or --target"), err.Error())
	assert.Equal(t, "", o.SpecFile)

	// two Plan secrets with a spec each
	dir := t.TempDir()
	for _, s := range []string{"a", "b"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, s), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, s, "spec.yaml"), []byte("{}"), 0o644))
	}
	o = Options{SecretsDir: dir, Log: slog.New(slog.DiscardHandler)}
	_, _, err = planCharts(&o)
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), "more than one upgrade spec under "+dir), err.Error())
}

func TestPlanChartsOfOneTarget(t *testing.T) {
	for _, k := range targets.Kinds() {
		t.Run(k.Name, func(t *testing.T) {
			// with a chart source every kind goes, with the spec's defaults
			o := Options{Target: k.Spelling + "/apps/web", ChartSource: "./charts", ChartName: "demo"}
			charts, file, err := planCharts(&o)
			require.NoError(t, err)
			assert.Equal(t, "", file, "no spec file was read")
			require.Len(t, charts, 1)
			c := charts[0]
			assert.Equal(t, spec.Target{Kind: k.Name, Namespace: "apps", Name: "web"}, c.Target)
			assert.Equal(t, spec.ChartRef{Name: "demo", Source: "./charts"}, c.Chart)
			assert.Equal(t, spec.Wait{Timeout: spec.DefaultWaitTimeout, FailureGrace: spec.DefaultFailureGrace, PodFailureGrace: spec.DefaultPodFailureGrace, Settle: spec.DefaultSettle}, c.Wait)
			assert.Equal(t, spec.DefaultImages, c.Images)
			assert.Empty(t, c.Rules)
			if k.Options != nil {
				assert.Equal(t, k.Options.Default(), c.Options, "the kind's default options")
			} else {
				assert.Nil(t, c.Options)
			}

			// without one, only a kind whose object names its source goes
			o = Options{Target: k.Name + "/apps/web"}
			charts, _, err = planCharts(&o)
			if k.OwnSource {
				require.NoError(t, err)
				require.Len(t, charts, 1)
				assert.Equal(t, "", charts[0].Chart.Source)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.True(t, strings.HasPrefix(err.Error(), "--chart-source is required with --target "+k.Name+"/apps/web (only a "), err.Error())
		})
	}

	o := Options{Target: "nosuchkind/apps/web", ChartSource: "./charts"}
	_, _, err := planCharts(&o)
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), "--target: "), err.Error())

	o = Options{Target: targets.Kinds()[0].Name + "/apps/web", ChartSource: "./charts",
		PolicyFile: filepath.Join(t.TempDir(), "missing-policy.yaml")}
	_, _, err = planCharts(&o)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "--policy: "), err.Error())
}

// --crds and --crds-migrate are the --target chart's apply.crds; skip is
// the default, as the spec reads it.
func TestPlanChartsTakesCRDsWithTarget(t *testing.T) {
	for _, tc := range []struct {
		crds    string
		migrate bool
		want    string
	}{{"createReplace", true, "createReplace"}, {"create", false, "create"}, {"skip", false, ""}} {
		o := Options{Target: "release/ns/r", ChartSource: "./charts", CRDs: tc.crds, CRDsSet: true, MigrateCRDs: tc.migrate}
		charts, _, err := planCharts(&o)
		require.NoError(t, err, tc.crds)
		require.Len(t, charts, 1)
		assert.Equal(t, tc.want, charts[0].Apply.CRDs, tc.crds)
		assert.Equal(t, tc.migrate, charts[0].Apply.MigrateCRDs, tc.crds)
	}
}
