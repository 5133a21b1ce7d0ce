package phase

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
)

func mc(version string, values map[string]any, ann map[string]string) *target.ManagedChart {
	if ann == nil {
		ann = map[string]string{}
	}
	return &target.ManagedChart{Version: version, Values: values, Annotations: ann}
}

func TestAssess(t *testing.T) {
	vals := map[string]any{"a": int64(1)}
	m := mc("1.0.0", vals, nil)
	hash := m.ValuesHash()
	applied := map[string]string{target.AnnotationVersion: "2.0.0", target.AnnotationValuesHash: hash}
	for _, tc := range []struct {
		name  string
		mc    *target.ManagedChart
		want  string
		ready bool
		is    Situation
	}{
		{"older version: upgrade", mc("1.0.0", vals, nil), "2.0.0", false, SituationUpgrade},
		{"newer version: downgrade", mc("3.0.0", vals, nil), "2.0.0", false, SituationDowngrade},
		{"non-semver versions are not a downgrade", mc("main", vals, nil), "2.0.0", false, SituationUpgrade},
		{"same version, not by us", mc("2.0.0", vals, nil), "2.0.0", true, SituationSameVersion},
		{"applied by us, not ready", mc("2.0.0", vals, applied), "2.0.0", false, SituationApplied},
		{"applied by us and ready: done", mc("2.0.0", vals, applied), "2.0.0", true, SituationDone},
		{"values changed since our apply", mc("2.0.0", map[string]any{"a": int64(2)}, applied), "2.0.0", true, SituationSameVersion},
		{"annotated for another version", mc("1.0.0", vals, applied), "2.0.0", true, SituationUpgrade},
		{"spec.version moved back by someone", mc("1.0.0", vals, applied), "1.0.0", true, SituationSameVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.is, Assess(tc.mc, tc.want, tc.ready))
		})
	}
}

func writeChart(t *testing.T, dir, name, version string) {
	t.Helper()
	root := filepath.Join(dir, name+"-"+version)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "Chart.yaml"),
		[]byte("apiVersion: v2\nname: "+name+"\nversion: "+version+"\n"), 0o644))
}

func TestLoadVersionReadsSUCVersions(t *testing.T) {
	dir := t.TempDir()
	writeChart(t, dir, "app", "1.2.3")
	writeChart(t, dir, "app", "1.3.0+rke2r1")
	src, err := chartpkg.NewSource(dir, chartpkg.SourceOptions{})
	require.NoError(t, err)
	s := &State{Source: src}
	for _, tc := range []struct{ asked, found string }{
		{"1.2.3", "1.2.3"},
		{"v1.2.3", "1.2.3"},              // channels often say v1.2.3
		{"1.3.0-rke2r1", "1.3.0+rke2r1"}, // SUC turned + into -
		{"v1.3.0-rke2r1", "1.3.0+rke2r1"},
	} {
		v := tc.asked
		c, err := loadVersion(context.Background(), s, "app", &v)
		require.NoError(t, err, tc.asked)
		assert.Equal(t, tc.found, v)
		assert.Equal(t, tc.found, c.Metadata.Version)
	}
	v := "9.9.9"
	_, err = loadVersion(context.Background(), s, "app", &v)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "9.9.9")
}

func TestDiscoverSpec(t *testing.T) {
	dir := t.TempDir()
	_, err := DiscoverSpec(filepath.Join(dir, "missing"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist")
	_, err = DiscoverSpec(dir)
	require.ErrorContains(t, err, "no spec.yaml in any secret under "+dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "spec.yaml"), []byte("x"), 0o600))
	got, err := DiscoverSpec(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "a", "spec.yaml"), got)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b", "spec.yaml"), []byte("x"), 0o600))
	_, err = DiscoverSpec(dir)
	require.ErrorContains(t, err, "more than one upgrade spec")
}

func TestLocalPaths(t *testing.T) {
	host := t.TempDir()
	state, lock := LocalPaths(host, "", "")
	assert.Equal(t, filepath.Join(host, "var", "lib", "chart-upgrader"), state)
	assert.Equal(t, filepath.Join(host, "run", "chart-upgrader", "upgrade.lock"), lock)
	t.Setenv("XDG_STATE_HOME", "/xdg")
	state, lock = LocalPaths(filepath.Join(host, "absent"), "", "")
	assert.Equal(t, "/xdg/chart-upgrader", state)
	assert.Equal(t, "/xdg/chart-upgrader/upgrade.lock", lock)
	state, lock = LocalPaths(host, "/s", "/l")
	assert.Equal(t, "/s", state)
	assert.Equal(t, "/l", lock)
}
