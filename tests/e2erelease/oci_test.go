package e2erelease

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
)

// Dnew from an OCI registry (charts pushed as helm push does, served over
// TLS by a real registry), Dold from the release itself.
func TestUpgradeFromAnOCIRegistry(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	dir := t.TempDir()
	reg, err := ociregistry.Start(t.Context(), dir)
	require.NoError(t, err)
	t.Cleanup(reg.Close)
	c, err := loader.Load(filepath.Join(f.charts, "demo-app-2.0.0"))
	require.NoError(t, err)
	data, err := chart.Archive(c)
	require.NoError(t, err)
	path := filepath.Join(dir, "demo-app-2.0.0.tgz")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	require.NoError(t, reg.Push(path, "charts"))

	r := f.cli(newNode(t, "node-1"), "upgrade", "--target", f.target(name), "--chart-source", "oci://"+reg.Host+"/charts",
		"--ca-file", reg.CAFile, "--version", "2.0.0", "--policy", f.policy(name), "--timeout", "60s")
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	assert.NotContains(t, r.Stderr, "no old defaults", "1.0.0 is not in the registry: its defaults come from the release")
	assert.Contains(t, r.Stdout, "follow #1") // the old default of the webhook tag was known
	h := f.history(name)
	require.Len(t, h, 2)
	assert.Equal(t, "2.0.0", h[1].Chart.Metadata.Version)
}
