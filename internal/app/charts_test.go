package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// writeDemo writes chart demo at version into dir: a ConfigMap that
// requires .Values.name and a Secret whose password is generated at every
// render.
func writeDemo(t *testing.T, dir, version string) {
	t.Helper()
	_, err := testchart.Write(dir, testchart.Chart{Name: "demo", Version: version,
		Values: map[string]any{"replicas": 2, "image": map[string]any{"tag": version}},
		Templates: map[string]string{
			"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ required \"name is required\" .Values.name }}\n",
			"secret.yaml":    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pw\nstringData:\n  password: {{ randAlphaNum 16 }}\n",
		}})
	require.NoError(t, err)
}

func TestOpenSourceLoadsWhatTheCoreNeeds(t *testing.T) {
	dir := t.TempDir()
	writeDemo(t, dir, "1.0.0")
	writeDemo(t, dir, "1.1.0")
	src, err := openSource(dir, "", chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Equal(t, dir, src.String())

	versions, err := src.Versions(t.Context(), "demo")
	require.NoError(t, err)
	assert.Equal(t, []string{"1.1.0", "1.0.0"}, versions)

	c, err := src.Load(t.Context(), "demo", "v1.0.0")
	require.NoError(t, err)
	assert.Equal(t, "demo", c.Name)
	assert.Equal(t, "1.0.0", c.Version, "the chart's own spelling")
	assert.Equal(t, map[string]any{"replicas": int64(2), "image": map[string]any{"tag": "1.0.0"}}, c.Defaults)
	assert.Equal(t, []string{"templates/secret.yaml"}, c.RegeneratedData)

	// Check renders the chart with the user values
	require.NoError(t, c.Check(map[string]any{"name": "cfg"}))
	err = c.Check(map[string]any{})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrRefused)
	assert.Contains(t, err.Error(), "name is required")

	// Archive is the chart as a .tgz Helm loads
	tgz, err := c.Archive()
	require.NoError(t, err)
	back, err := loader.LoadArchive(bytes.NewReader(tgz))
	require.NoError(t, err)
	assert.Equal(t, "demo", back.Name())
	assert.Equal(t, "1.0.0", back.Metadata.Version)
	assert.Len(t, back.Templates, 2)

	// a version the source does not hold is bad input
	_, err = src.Load(t.Context(), "demo", "9.9.9")
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
}

func TestOpenSourceErrors(t *testing.T) {
	_, err := openSource("", "", chartpkg.Renderer{})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)

	missing := filepath.Join(t.TempDir(), "no-charts-here")
	_, err = openSource(missing, "", chartpkg.Renderer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
}

func TestOpenSourceNamesARepositoryWithoutItsCredentials(t *testing.T) {
	src, err := openSource("https://ci-bot:s3cret-pw@charts.example.com/stable", "", chartpkg.Renderer{})
	require.NoError(t, err, "nothing is fetched before the first call")
	assert.Contains(t, src.String(), "charts.example.com/stable")
	assert.NotContains(t, src.String(), "s3cret-pw")
}

// ref is the target every fake below names.
var ref = upgrade.Ref{Kind: "release", Namespace: "apps", Name: "web"}

// plainTarget is a target that holds no chart; only Ref is called.
type plainTarget struct{ upgrade.Target }

func (plainTarget) Ref() upgrade.Ref { return ref }

// holdingTarget holds its deployed chart and may name its own source.
type holdingTarget struct {
	plainTarget
	deployed    *chart.Chart
	deployedErr error
	own         chartpkg.Source
	ownErr      error
	reads       int // DeployedChart calls
}

func (h *holdingTarget) DeployedChart(context.Context) (*chart.Chart, error) {
	h.reads++
	return h.deployed, h.deployedErr
}

func (h *holdingTarget) OwnSource(context.Context) (chartpkg.Source, error) { return h.own, h.ownErr }

// fakeSource serves one chart, or fails.
type fakeSource struct {
	name  string
	chart *upgrade.Chart
	err   error
}

func (f *fakeSource) Load(_ context.Context, name, version string) (*upgrade.Chart, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.chart, nil
}

func (f *fakeSource) Versions(context.Context, string) ([]string, error) {
	return []string{"3.0.0", "2.0.0"}, f.err
}

func (f *fakeSource) String() string { return f.name }

func TestTargetSourceOfATargetThatHoldsNoChart(t *testing.T) {
	spec := &fakeSource{name: "https://charts.example.com"}
	got, err := targetSource(t.Context(), plainTarget{}, spec, chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Same(t, spec, got, "the spec's source, as is")

	got, err = targetSource(t.Context(), plainTarget{}, nil, chartpkg.Renderer{})
	require.Error(t, err)
	assert.Nil(t, got)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Equal(t, "release/apps/web: no chart source: give chart.source in the spec (or --chart-source)", err.Error())
}

func TestTargetSourceOfATargetThatHoldsItsChart(t *testing.T) {
	// the spec's source wins; the target's own is not even asked for
	spec := &fakeSource{name: "https://charts.example.com"}
	h := &holdingTarget{ownErr: errors.New("must not be read")}
	got, err := targetSource(t.Context(), h, spec, chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Equal(t, "https://charts.example.com", got.String())
	v, err := got.Versions(t.Context(), "demo")
	require.NoError(t, err)
	assert.Equal(t, []string{"3.0.0", "2.0.0"}, v)

	// no spec source: the one the target names
	dir := t.TempDir()
	writeDemo(t, dir, "2.0.0")
	own, err := chartpkg.NewSource(dir, chartpkg.SourceOptions{})
	require.NoError(t, err)
	got, err = targetSource(t.Context(), &holdingTarget{own: own}, nil, chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Equal(t, dir, got.String())
	c, err := got.Load(t.Context(), "demo", "2.0.0")
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", c.Version)
	assert.Equal(t, int64(2), c.Defaults["replicas"])

	// it names none
	_, err = targetSource(t.Context(), &holdingTarget{}, nil, chartpkg.Renderer{})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Equal(t, "release/apps/web: no chart source: the target names none, give chart.source in the spec (or --chart-source)", err.Error())

	// reading it failed
	boom := errors.New("reading the HelmChart: forbidden")
	_, err = targetSource(t.Context(), &holdingTarget{ownErr: boom}, nil, chartpkg.Renderer{})
	assert.Same(t, boom, err)
}

// deployedDemo is a loaded chart demo at version, as a release stores it.
func deployedDemo(version string) *chart.Chart {
	return &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "demo", Version: version},
		Values: map[string]any{"replicas": 1, "old": true},
		Templates: []*common.File{{Name: "templates/cm.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n")}}}
}

func TestHeldSourceServesTheDeployedVersionTheSourceLacks(t *testing.T) {
	gone := outcome.BadInput(errors.New("chart demo 1.0.0 not found in https://charts.example.com (it has 2.0.0)"))
	repo := &fakeSource{name: "https://charts.example.com", err: gone}
	for _, want := range []string{"1.0.0", "v1.0.0"} {
		h := &holdingTarget{deployed: deployedDemo("1.0.0")}
		src, err := targetSource(t.Context(), h, repo, chartpkg.Renderer{})
		require.NoError(t, err)
		c, err := src.Load(t.Context(), "demo", want)
		require.NoError(t, err, want)
		assert.Equal(t, "demo", c.Name)
		assert.Equal(t, "1.0.0", c.Version)
		assert.Equal(t, map[string]any{"replicas": int64(1), "old": true}, c.Defaults, "the deployed chart's defaults")
		require.NoError(t, c.Check(nil))
		assert.Equal(t, 1, h.reads)
	}

	// a deployed chart spelled v1.0.0 serves 1.0.0 too
	src, err := targetSource(t.Context(), &holdingTarget{deployed: deployedDemo("v1.0.0")}, repo, chartpkg.Renderer{})
	require.NoError(t, err)
	c, err := src.Load(t.Context(), "demo", "1.0.0")
	require.NoError(t, err)
	assert.Equal(t, "v1.0.0", c.Version)
}

func TestHeldSourceKeepsTheSourcesErrorOtherwise(t *testing.T) {
	gone := outcome.BadInput(errors.New("chart demo 3.0.0 not found"))
	repo := &fakeSource{name: "repo", err: gone}
	for name, h := range map[string]*holdingTarget{
		"no release":               {},
		"another version":          {deployed: deployedDemo("2.0.0")},
		"another chart":            {deployed: &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "other", Version: "3.0.0"}}},
		"a chart without metadata": {deployed: &chart.Chart{}},
	} {
		t.Run(name, func(t *testing.T) {
			src, err := targetSource(t.Context(), h, repo, chartpkg.Renderer{})
			require.NoError(t, err)
			c, err := src.Load(t.Context(), "demo", "3.0.0")
			assert.Nil(t, c)
			assert.Same(t, gone, err)
		})
	}

	// reading the deployed chart failed: both errors, the source's first
	forbidden := errors.New("secrets is forbidden")
	src, err := targetSource(t.Context(), &holdingTarget{deployedErr: forbidden}, repo, chartpkg.Renderer{})
	require.NoError(t, err)
	_, err = src.Load(t.Context(), "demo", "3.0.0")
	require.Error(t, err)
	assert.ErrorIs(t, err, gone)
	assert.ErrorIs(t, err, forbidden)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Equal(t, fmt.Sprintf("%s\nreading the deployed chart: %s", gone, forbidden), err.Error())

	// the source serves it: the deployed chart is not read
	served := &upgrade.Chart{Name: "demo", Version: "3.0.0"}
	h := &holdingTarget{deployed: deployedDemo("3.0.0")}
	src, err = targetSource(t.Context(), h, &fakeSource{name: "repo", chart: served}, chartpkg.Renderer{})
	require.NoError(t, err)
	c, err := src.Load(t.Context(), "demo", "3.0.0")
	require.NoError(t, err)
	assert.Same(t, served, c)
	assert.Equal(t, 0, h.reads)
}

func TestDescribeRefusesAChartWithoutMetadata(t *testing.T) {
	_, err := describe(&chart.Chart{}, chartpkg.Renderer{})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), "computing chart defaults"), err.Error())
}

// writeParent writes chart "parent" at version into dir, with a subchart
// "sub" whose template reads its own value.
func writeParent(t *testing.T, dir, version string) *chart.Chart {
	t.Helper()
	root, err := testchart.Write(dir, testchart.Chart{Name: "parent", Version: version,
		Values:    map[string]any{"name": "p"},
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n"},
		Subcharts: []testchart.Chart{{Name: "sub", Version: "0.1.0", Values: map[string]any{"level": "info"},
			Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sub\ndata:\n  level: {{ .Values.level }}\n"}}}})
	require.NoError(t, err)
	c, err := loader.Load(root)
	require.NoError(t, err)
	require.Len(t, c.Dependencies(), 1)
	return c
}

// Helm's release record stores a chart without its subcharts: drift reads
// the deployed version from the chart source then, and says so; without
// a source there is no chart (the drift compares the stored manifest
// alone), and the note names the flags that give one. A held chart with
// its subcharts is used as it is.
func TestDriftReadsTheDeployedSubchartsFromTheSource(t *testing.T) {
	dir := t.TempDir()
	full := writeParent(t, dir, "1.0.0")
	record := *full
	record.SetDependencies() // what Helm's release record gives back
	require.Equal(t, []string{"sub"}, chartpkg.MissingDependencies(&record))
	assert.Empty(t, chartpkg.MissingDependencies(full))

	held := &holdingTarget{deployed: &record}
	none, note, err := deployedChart(t.Context(), held, DriftOptions{}, "parent", "1.0.0", chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Nil(t, none, "no chart at hand")
	for _, want := range []string{"without its subcharts (sub)", "--chart-source", "--spec", "parent 1.0.0", "the release's stored manifest"} {
		assert.Contains(t, note, want)
	}

	c, note, err := deployedChart(t.Context(), held, DriftOptions{ChartSource: dir}, "parent", "1.0.0", chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"name": "p", "sub": map[string]any{"global": map[string]any{}, "level": "info"}}, c.Defaults,
		"the subchart's defaults, from the source")
	assert.Empty(t, note, "the source was asked for")

	// a target that names its own source (a HelmChart's repo): read from
	// there, and said
	own, err := chartpkg.NewSource(dir, chartpkg.SourceOptions{})
	require.NoError(t, err)
	c, note, err = deployedChart(t.Context(), &holdingTarget{deployed: &record, own: own}, DriftOptions{}, "parent", "1.0.0", chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Equal(t, "info", c.Defaults["sub"].(map[string]any)["level"])
	assert.Contains(t, note, "without its subcharts (sub)")
	assert.Contains(t, note, dir)

	held = &holdingTarget{deployed: full}
	c, note, err = deployedChart(t.Context(), held, DriftOptions{}, "parent", "1.0.0", chartpkg.Renderer{})
	require.NoError(t, err)
	assert.Empty(t, note)
	assert.Equal(t, "info", c.Defaults["sub"].(map[string]any)["level"])

	// the upgrade's source falls back to the held chart only when it is whole
	src, err := openSource(t.TempDir(), "", chartpkg.Renderer{})
	require.NoError(t, err)
	hs, err := targetSource(t.Context(), &holdingTarget{deployed: &record}, src, chartpkg.Renderer{})
	require.NoError(t, err)
	_, err = hs.Load(t.Context(), "parent", "1.0.0")
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Contains(t, err.Error(), "without its subcharts (sub)")
}

func TestDriftSpecNamesTheSource(t *testing.T) {
	dir := t.TempDir()
	specFile := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(specFile, []byte(fmt.Sprintf(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: release, namespace: apps, name: web}
  chart: {name: parent, source: %s}
`, dir)), 0o644))
	o := DriftOptions{Spec: specFile}
	require.NoError(t, o.fromSpec(spec.Target{Kind: "release", Namespace: "apps", Name: "web"}))
	assert.Equal(t, dir, o.ChartSource)
	assert.Equal(t, "parent", o.ChartName)

	o = DriftOptions{Spec: specFile, ChartSource: "elsewhere"}
	require.NoError(t, o.fromSpec(spec.Target{Kind: "release", Namespace: "apps", Name: "web"}))
	assert.Equal(t, "elsewhere", o.ChartSource, "a flag wins over the spec")

	err := (&DriftOptions{Spec: specFile}).fromSpec(spec.Target{Kind: "release", Namespace: "apps", Name: "other"})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Contains(t, err.Error(), "no chart has target release/apps/other")

	err = (&DriftOptions{Spec: filepath.Join(dir, "missing.yaml")}).fromSpec(spec.Target{Kind: "release", Namespace: "apps", Name: "web"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--spec")
}
