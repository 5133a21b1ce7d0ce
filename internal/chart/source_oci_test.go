package chart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
)

// Charts pushed to a real OCI registry (over TLS, its CA given) are listed
// and loaded by an oci:// source; a version it lacks, an unknown chart and
// an untrusted registry are bad input naming them.
func TestOCISource(t *testing.T) {
	dir := t.TempDir()
	reg, err := ociregistry.Start(t.Context(), dir)
	require.NoError(t, err)
	t.Cleanup(reg.Close)
	root := filepath.Join("..", "..", "package", "examples", "charts")
	for _, v := range []string{"1.0.0", "2.0.0"} {
		c, err := loader.Load(filepath.Join(root, "demo-app-"+v))
		require.NoError(t, err)
		data, err := chart.Archive(c)
		require.NoError(t, err)
		path := filepath.Join(dir, "demo-app-"+v+".tgz")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		require.NoError(t, reg.Push(path, "charts"))
	}
	src, err := chart.NewSource("oci://"+reg.Host+"/charts", chart.SourceOptions{CAFile: reg.CAFile})
	require.NoError(t, err)
	versions, err := src.Versions(t.Context(), "demo-app")
	require.NoError(t, err)
	assert.Equal(t, []string{"2.0.0", "1.0.0"}, versions)
	c, err := src.Load(t.Context(), "demo-app", "v2.0.0")
	require.NoError(t, err)
	assert.Equal(t, "2.0.0", c.Metadata.Version)
	assert.Equal(t, "v0.5.6", c.Values["webhook"].(map[string]any)["image"].(map[string]any)["tag"])

	_, err = src.Load(t.Context(), "demo-app", "9.9.9")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Contains(t, err.Error(), `"9.9.9" not found in oci://`+reg.Host+"/charts; available: 2.0.0, 1.0.0")

	untrusted, err := chart.NewSource("oci://"+reg.Host+"/charts", chart.SourceOptions{})
	require.NoError(t, err)
	_, err = untrusted.Versions(t.Context(), "demo-app")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Contains(t, err.Error(), "TLS certificate not trusted")

	_, err = chart.NewSource("oci://", chart.SourceOptions{})
	require.ErrorIs(t, err, outcome.ErrBadInput)
}
