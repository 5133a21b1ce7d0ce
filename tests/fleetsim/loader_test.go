package fleetsim_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

func TestDirLoader(t *testing.T) {
	src, repo := t.TempDir(), t.TempDir()
	_, err := testchart.Write(repo, testchart.ConfigMapChart("demo", "1.0.0", nil))
	require.NoError(t, err)
	dir, err := testchart.Write(src, testchart.ConfigMapChart("demo", "2.0.0", map[string]any{"a": "b"}))
	require.NoError(t, err)
	ch, err := loader.Load(dir)
	require.NoError(t, err)
	_, err = chartutil.Save(ch, repo) // demo-2.0.0.tgz
	require.NoError(t, err)

	load := fleetsim.DirLoader(repo)
	for _, v := range []string{"1.0.0", "2.0.0"} {
		got, err := load(t.Context(), "demo", v)
		require.NoError(t, err)
		require.Equal(t, v, got.Metadata.Version)
	}
	_, err = load(t.Context(), "demo", "3.0.0")
	require.ErrorContains(t, err, "chart demo version 3.0.0 not found")
}
