package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
)

// mergeCase is one chart upgrade merged through every path.
type mergeCase struct {
	name               string // the release (ManagedChart) name
	chart, from, to    string
	policy             string // policy file
	live               []any  // the live objects, as the cluster holds them
	oldChart, newChart string // chart directories
	user               map[string]any
}

// TestOneMergePathForAllCommands: the offline merge, merge --target,
// preflight and upgrade build their merge inputs through one function, so
// they decide the same values with the same sha256 — on the bundled demo
// example and on the real Harvester values (v1.3.2 → v1.4.3).
func TestOneMergePathForAllCommands(t *testing.T) {
	t.Run("demo", func(t *testing.T) {
		f := newFixture(t)
		name := release()
		f.install(name, "1.0.0", example.UserValues())
		f.demoteStorageClass(name + "-longhorn")
		sc, err := f.env.Kube().StorageV1().StorageClasses().Get(t.Context(), name+"-longhorn", metav1.GetOptions{})
		require.NoError(t, err)
		certs, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(t.Context(), "demo-app-webhook-certs", metav1.GetOptions{})
		require.NoError(t, err)
		f.mergeEverywhere(mergeCase{name: name, chart: "demo-app", from: "1.0.0", to: "2.0.0", policy: f.policy(name),
			live:     []any{typed(sc, "storage.k8s.io/v1", "StorageClass"), typed(certs, "v1", "Secret")},
			oldChart: filepath.Join(f.charts, "demo-app-1.0.0"), newChart: filepath.Join(f.charts, "demo-app-2.0.0"),
			user: f.get(name).Values})
	})
	t.Run("harvester", func(t *testing.T) {
		f := newFixture(t)
		name := release()
		for _, v := range []string{"1.3.2", "1.4.3"} {
			defaults, err := os.ReadFile(filepath.Join(repoRoot(t), "internal", "values", "testdata", "harvester", "values-v"+v+".yaml"))
			require.NoError(t, err)
			dir := filepath.Join(f.charts, "harvester-"+v)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: harvester\nversion: "+v+"\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "values.yaml"), defaults, 0o644))
		}
		userData, err := os.ReadFile(filepath.Join("testdata", "harvester-user-values.yaml"))
		require.NoError(t, err)
		user, err := values.Parse(userData)
		require.NoError(t, err)
		// the operator made another StorageClass the default
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name + "-harvester-longhorn",
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "false"}}, Provisioner: "driver.longhorn.io"}
		sc, err = f.env.Kube().StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = f.env.Kube().StorageV1().StorageClasses().Delete(t.Context(), sc.Name, metav1.DeleteOptions{})
		})
		policy, err := os.ReadFile(filepath.Join("testdata", "harvester-policy.yaml"))
		require.NoError(t, err)
		mc, err := example.InstallAndWait(t.Context(), f.env, example.Install{Namespace: f.ns, Name: name, Chart: "harvester",
			Version: "1.3.2", Values: user}, 60*time.Second)
		require.NoError(t, err)
		f.mergeEverywhere(mergeCase{name: name, chart: "harvester", from: "1.3.2", to: "1.4.3",
			policy:   f.writeFile("policy.yaml", strings.ReplaceAll(string(policy), "STORAGECLASS", sc.Name)),
			live:     []any{typed(sc, "storage.k8s.io/v1", "StorageClass")},
			oldChart: filepath.Join(f.charts, "harvester-1.3.2"), newChart: filepath.Join(f.charts, "harvester-1.4.3"),
			user: mc.Values})
	})
}

// typed sets the apiVersion and kind a typed object read from the API
// server comes without, and drops its managed fields.
func typed(obj metav1.Object, apiVersion, kind string) any {
	obj.SetManagedFields(nil)
	data, _ := yaml.Marshal(obj)
	var m map[string]any
	_ = yaml.Unmarshal(data, &m)
	m["apiVersion"], m["kind"] = apiVersion, kind
	return m
}

// mergeEverywhere merges c offline (with the live objects and the user
// values written to files), with merge --target, with preflight (the hash
// it journals) and with upgrade (what it writes), and asserts that all
// four decide the same values with the same hash.
func (f *fixture) mergeEverywhere(c mergeCase) {
	t := f.t
	t.Helper()
	userYAML, err := values.Marshal(c.user)
	require.NoError(t, err)
	var liveDocs []string
	for _, o := range c.live {
		d, err := yaml.Marshal(o)
		require.NoError(t, err)
		liveDocs = append(liveDocs, string(d))
	}
	offline, err := app.MergeOffline(t.Context(), app.MergeFiles{Values: f.writeFile("values.yaml", string(userYAML)),
		Chart: c.newChart, OldChart: c.oldChart, Policy: c.policy, Live: f.writeFile("live.yaml", strings.Join(liveDocs, "---\n"))})
	require.NoError(t, err)

	ref := "managedchart/" + f.ns + "/" + c.name
	target, err := app.MergeTarget(t.Context(), app.MergeTargetOptions{Target: ref, ChartSource: f.charts, Version: c.to,
		PolicyFile: c.policy, Kubeconfig: f.env.KubeconfigPath()})
	require.NoError(t, err)

	args := []string{"--target", ref, "--chart-source", f.charts, "--version", c.to, "--policy", c.policy, "--timeout", "60s"}
	r := f.cli(f.node, "preflight", args...)
	require.Equal(t, 0, r.Code, r.Stderr)
	store, err := host.Open(f.node.StateDir)
	require.NoError(t, err)
	entry, ok, err := store.Load(ref, c.to)
	require.NoError(t, err)
	require.True(t, ok, "preflight journals the merge it checked")

	r = f.cli(f.node, "upgrade", args...)
	require.Equal(t, 0, r.Code, r.Stderr)
	upgraded := f.get(c.name)
	written, err := values.Hash(upgraded.Values)
	require.NoError(t, err)

	assert.Equal(t, offline.SHA256, target.SHA256, "offline merge vs merge --target")
	assert.Equal(t, offline.SHA256, entry.ValuesHash, "offline merge vs preflight")
	assert.Equal(t, offline.SHA256, written, "offline merge vs what upgrade wrote")
	assert.Equal(t, offline.SHA256, upgraded.Annotations["chart-upgrader.io/values-sha256"], "the recorded hash")
	assert.Equal(t, offline.Values, target.Values)
	assert.Equal(t, values.Normalize(offline.Values), upgraded.Values)
	t.Logf("%s %s → %s: %d decisions, sha256 %s from all four paths", c.chart, c.from, c.to, len(offline.Decisions), offline.SHA256)
}
