// Package security checks chart-upgrader's security properties end to end:
// the modes of its local files, that secret values never reach logs,
// Events, reports or the termination message, that every HTTP client
// verifies TLS, and that downloads are bounded.
package security

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/cli"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

var releaseSeq atomic.Int64

// world is one test's cluster: a namespace on the shared API server with
// the Fleet simulator serving it, and a directory of the example charts.
type world struct {
	t      *testing.T
	env    *testenv.Env
	ns     string
	root   string // the repository root
	charts string // the example charts 1.0.0 and 2.0.0
	tc     *managedchart.Client
	node   node
}

// node is the local side of one chart-upgrader process.
type node struct{ dir, stateDir, lockFile, termLog string }

func newNode(t *testing.T) node {
	dir := t.TempDir()
	return node{dir: dir, stateDir: filepath.Join(dir, "state"), lockFile: filepath.Join(dir, "run", "upgrade.lock"),
		termLog: filepath.Join(dir, "termination-log")}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	env := testenv.ForTest(t)
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	w := &world{t: t, env: env, ns: env.Namespace(t), root: root, charts: t.TempDir(),
		tc: &managedchart.Client{Dynamic: env.Dynamic(), Kube: env.Kube()}, node: newNode(t)}
	require.NoError(t, example.CopyDir(w.example("charts"), w.charts))
	_, stopSim, err := fleetsim.Start(t.Context(), fleetsim.Options{Config: env.Config(), Loader: fleetsim.DirLoader(w.charts), Namespace: w.ns})
	require.NoError(t, err)
	t.Cleanup(stopSim)
	return w
}

// example is a path under package/examples.
func (w *world) example(rel ...string) string {
	return filepath.Join(append([]string{w.root, "package", "examples"}, rel...)...)
}

// install creates a ManagedChart of the example chart at 1.0.0 with values
// and waits until it is deployed and ready. Its name is unique in the test
// binary (the chart's StorageClass is cluster-scoped and named after it).
func (w *world) install(values map[string]any) string {
	w.t.Helper()
	name := fmt.Sprintf("sec%d", releaseSeq.Add(1))
	_, err := example.InstallAndWait(w.t.Context(), w.env,
		example.Install{Namespace: w.ns, Name: name, Version: "1.0.0", Values: values}, 60*time.Second)
	require.NoError(w.t, err)
	return name
}

// result is what one run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs chart-upgrader in-process: args after the program name, then the
// cluster flags of the world's node when cluster is set.
func (w *world) cli(cluster bool, args ...string) result {
	w.t.Helper()
	full := append([]string{"chart-upgrader"}, args...)
	if cluster {
		full = append(full, "--kubeconfig", w.env.KubeconfigPath(), "--host-root", filepath.Join(w.node.dir, "no-host"),
			"--state-dir", w.node.stateDir, "--lock-file", w.node.lockFile,
			"--termination-log", w.node.termLog, "--log-format", "json")
		if len(args) > 0 && (args[0] == "upgrade" || args[0] == "preflight" || args[0] == "rollback") {
			full = append(full, "--node-name", "node-1")
		}
	}
	ctx, cancel := context.WithTimeout(w.t.Context(), 3*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, full, &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// packChart archives the example chart at version the way `helm package`
// does: its files under "demo-app/", Chart.yaml first.
func (w *world) packChart(version string) []byte {
	w.t.Helper()
	dir := w.example("charts", "demo-app-"+version)
	var names []string
	require.NoError(w.t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	}))
	sort.SliceStable(names, func(i, j int) bool { return names[i] == "Chart.yaml" && names[j] != "Chart.yaml" })
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(n)))
		require.NoError(w.t, err)
		require.NoError(w.t, tw.WriteHeader(&tar.Header{Name: "demo-app/" + n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err = tw.Write(body)
		require.NoError(w.t, err)
	}
	require.NoError(w.t, tw.Close())
	require.NoError(w.t, zw.Close())
	return buf.Bytes()
}

// repoIndex lists the example chart at 1.0.0 and 2.0.0.
const repoIndex = `apiVersion: v1
entries:
  demo-app:
  - {apiVersion: v2, name: demo-app, version: 2.0.0, urls: [charts/demo-app-2.0.0.tgz]}
  - {apiVersion: v2, name: demo-app, version: 1.0.0, urls: [charts/demo-app-1.0.0.tgz]}
`

// repo serves a Helm repository of the example chart; index and the
// archive of 2.0.0 can be replaced.
func (w *world) repo(index http.Handler, archive2 http.Handler) http.Handler {
	if index == nil {
		index = blob([]byte(repoIndex))
	}
	if archive2 == nil {
		archive2 = blob(w.packChart("2.0.0"))
	}
	mux := http.NewServeMux()
	mux.Handle("/index.yaml", index)
	mux.Handle("/charts/demo-app-1.0.0.tgz", blob(w.packChart("1.0.0")))
	mux.Handle("/charts/demo-app-2.0.0.tgz", archive2)
	return mux
}

func blob(data []byte) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { _, _ = rw.Write(data) })
}
