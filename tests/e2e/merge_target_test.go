package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
)

// TestMergeTargetReadsTheClusterAndWritesNothing: merge --target takes U
// from the ManagedChart, the old defaults from the source at the deployed
// version and the live objects from the cluster.
func TestMergeTargetReadsTheClusterAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.demoteStorageClass(name + "-longhorn")
	before := f.get(name)

	r := f.cli(f.node, "merge", "--target", "managedchart/"+f.ns+"/"+name, "--chart-source", f.charts,
		"--version", "2.0.0", "--policy", f.policy(name), "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var res struct {
		From, To  string
		Values    map[string]any
		Decisions []struct {
			Path, Policy, Action string
			Old, Result          any
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res))
	assert.Equal(t, "1.0.0", res.From)
	assert.Equal(t, "2.0.0", res.To)
	byPath := map[string]string{}
	for _, d := range res.Decisions {
		byPath[d.Path] = d.Policy + "/" + d.Action
		if d.Path == "webhook.image.tag" {
			assert.Equal(t, "v0.4.1", d.Old, "old defaults from the deployed chart 1.0.0")
		}
	}
	assert.Equal(t, "follow/drop", byPath["webhook.image.tag"])
	assert.Equal(t, "live/set", byPath["storageClass.defaultStorageClass"])
	assert.Equal(t, "once/set", byPath["webhook.certs.cert"], "pinned from the live Secret")
	assert.Equal(t, false, res.Values["storageClass"].(map[string]any)["defaultStorageClass"])

	// and it writes nothing
	wc := &writeCounter{}
	seams := app.Seams{WrapTransport: func(rt http.RoundTripper) http.RoundTripper { wc.next = rt; return wc }}
	_, err := app.MergeTarget(app.WithSeams(t.Context(), seams), app.MergeTargetOptions{Target: "managedchart/" + f.ns + "/" + name,
		ChartSource: f.charts, Version: "2.0.0", PolicyFile: f.policy(name), Kubeconfig: f.env.KubeconfigPath()})
	require.NoError(t, err)
	assert.Zero(t, wc.writes.Load(), "writes: %v", wc.seen)
	assertUnchanged(t, before, f.get(name))

	// offline-only flags are refused in cluster mode
	r = f.cli(f.node, "merge", "--target", "managedchart/"+f.ns+"/"+name, "--chart-source", f.charts, "--values", "x.yaml")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "--values is for offline merges")
}

// TestUpgradeFromAHelmRepositoryOverHTTP serves the charts as a Helm
// repository (index.yaml and archives) on loopback.
func TestUpgradeFromAHelmRepositoryOverHTTP(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())

	repoDir := t.TempDir()
	for _, v := range []string{"1.0.0", "2.0.0"} {
		c, err := loader.Load(filepath.Join(f.charts, "demo-app-"+v))
		require.NoError(t, err)
		_, err = chartutil.Save(c, repoDir)
		require.NoError(t, err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(repoDir)))
	t.Cleanup(srv.Close)
	idx, err := repo.IndexDirectory(repoDir, srv.URL)
	require.NoError(t, err)
	require.NoError(t, idx.WriteFile(filepath.Join(repoDir, "index.yaml"), 0o644))

	args := f.upgradeArgs(name, "2.0.0", f.policy(name))
	for i, a := range args {
		if a == f.charts {
			args[i] = srv.URL
		}
	}
	r := f.cli(f.node, "upgrade", args...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Equal(t, "2.0.0", f.get(name).Version)
	assert.Contains(t, r.Stdout, "webhook.image.tag")
	assert.Contains(t, r.Stdout, "drop", "the old defaults came from the repository's 1.0.0")
}
