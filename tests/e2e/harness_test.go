package e2e

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

// fixture is one test's world: a namespace on the shared API server, a
// Fleet simulator serving it, a directory of charts, and the local files
// of one "node" (state dir, lock file, termination log).
type fixture struct {
	t      *testing.T
	env    *testenv.Env
	ns     string
	sim    *fleetsim.Sim
	charts string
	node   node
	tc     *managedchart.Client
}

// node is the local side of one chart-upgrader process.
type node = noderun.Node

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.ForTest(t)
	f := &fixture{t: t, env: env, ns: env.Namespace(t), charts: t.TempDir(), node: noderun.New(t, "node-1")}
	require.NoError(t, example.CopyDir(filepath.Join(repoRoot(t), "package", "examples", "charts"), f.charts))
	sim, stopSim, err := fleetsim.Start(t.Context(), fleetsim.Options{Config: env.Config(), Loader: fleetsim.DirLoader(f.charts), Namespace: f.ns,
		DriftDelay: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(stopSim)
	f.sim = sim
	f.tc = &managedchart.Client{Dynamic: env.Dynamic(), Kube: env.Kube()}
	return f
}

func repoRoot(t *testing.T) string {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	return root
}

// install creates a ManagedChart of demo-app at version with the user
// values, and waits until the simulator reports it deployed and ready.
func (f *fixture) install(name, version string, values map[string]any) *managedchart.ManagedChart {
	f.t.Helper()
	mc, err := example.InstallAndWait(f.t.Context(), f.env,
		example.Install{Namespace: f.ns, Name: name, Version: version, Values: values}, 60*time.Second)
	require.NoError(f.t, err)
	return mc
}

// waitReady waits (by watch) until the ManagedChart is ready for want.
func (f *fixture) waitReady(name string, want upgrade.Want) *managedchart.ManagedChart {
	f.t.Helper()
	mc, err := example.WaitReady(f.t.Context(), f.env, f.ns, name, want, 60*time.Second)
	require.NoError(f.t, err)
	return mc
}

func (f *fixture) get(name string) *managedchart.ManagedChart {
	f.t.Helper()
	mc, found, err := f.tc.Get(f.t.Context(), f.ns, name)
	require.NoError(f.t, err)
	require.True(f.t, found)
	return mc
}

// writeFile writes a file in a temporary directory and returns its path.
func (f *fixture) writeFile(name, content string) string {
	f.t.Helper()
	path := filepath.Join(f.t.TempDir(), name)
	require.NoError(f.t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// policy is the bundled example policy with its namespaced sources moved
// to the test's namespace and its StorageClass to the release's.
func (f *fixture) policy(release string) string {
	data, err := os.ReadFile(filepath.Join(repoRoot(f.t), "package", "examples", "policy.yaml"))
	require.NoError(f.t, err)
	p := strings.ReplaceAll(string(data), "namespace: demo-system", "namespace: "+f.ns)
	p = strings.ReplaceAll(p, "name: demo-app-longhorn", "name: "+release+"-longhorn")
	return f.writeFile("policy.yaml", p)
}

// result is what one run printed and returned.
type result = noderun.Result

// cli runs chart-upgrader in-process as node n: command, the node's
// flags, then args (so a flag given again in args, --kubeconfig, wins).
func (f *fixture) cli(n node, command string, args ...string) result {
	f.t.Helper()
	return n.Run(f.t.Context(), f.env, command, args...)
}

// upgradeArgs upgrades one target of the fixture to version with a policy.
func (f *fixture) upgradeArgs(name, version, policy string, extra ...string) []string {
	args := []string{"--target", "managedchart/" + f.ns + "/" + name, "--chart-source", f.charts, "--version", version,
		"--timeout", "60s"}
	if policy != "" {
		args = append(args, "--policy", policy)
	}
	return append(args, extra...)
}

// writeCounter counts the requests that are not reads.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
	mu     sync.Mutex
	seen   []string // the writes
	all    []string // every request, reads included ("GET /api…?watch=true" for a watch)
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	req := r.Method + " " + r.URL.Path
	if r.URL.Query().Get("watch") == "true" {
		req += "?watch=true"
	}
	w.all = append(w.all, req)
	switch {
	case r.Method == http.MethodGet, r.Method == http.MethodHead, r.Method == http.MethodOptions:
	case testenv.StoresNothing(r.URL.RequestURI()): // the conflict check's dry runs and questions
	default:
		w.writes.Add(1)
		w.seen = append(w.seen, r.Method+" "+r.URL.Path)
	}
	return w.next.RoundTrip(r)
}

// requests is every request so far.
func (w *writeCounter) requests() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.all...)
}

// upgradeCounting runs the upgrade in-process with the API transport
// wrapped, and returns its log, the write requests it made and its error.
// beforeApply, when given, runs before each write of the target.
func (f *fixture) upgradeCounting(n node, opts app.Options, beforeApply ...func(ctx context.Context, attempt int)) (string, *writeCounter, error) {
	f.t.Helper()
	var logs bytes.Buffer
	wc := &writeCounter{}
	opts.Kubeconfig, opts.StateDir, opts.LockFile, opts.TerminationLog, opts.NodeName =
		f.env.KubeconfigPath(), n.StateDir, n.LockFile, n.TermLog, n.Name
	opts.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	opts.Out = &logs
	seams := app.Seams{WrapTransport: func(rt http.RoundTripper) http.RoundTripper { wc.next = rt; return wc }}
	if len(beforeApply) > 0 {
		seams.BeforeApply = beforeApply[0]
	}
	err := app.Upgrade(app.WithSeams(f.t.Context(), seams), opts)
	return logs.String(), wc, err
}

// backups lists the backup Secrets of a target.
func (f *fixture) backups(name string) []corev1.Secret {
	f.t.Helper()
	list, err := f.env.Kube().CoreV1().Secrets(f.ns).List(f.t.Context(), metav1.ListOptions{LabelSelector: managedchart.LabelBackupOf + "=" + name})
	require.NoError(f.t, err)
	return list.Items
}

// secretData reads one key of a Secret.
func (f *fixture) secretData(name, key string) []byte {
	f.t.Helper()
	s, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return s.Data[key]
}

func (f *fixture) configMap(name string) map[string]string {
	f.t.Helper()
	cm, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return cm.Data
}

func (f *fixture) leaseExists(name string) bool {
	_, err := f.env.Kube().CoordinationV1().Leases(f.ns).Get(f.t.Context(), "chart-upgrader-"+name, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

// binary builds chart-upgrader once per test binary, for tests that need
// separate processes (crashes, many nodes at once).
func binary(t *testing.T) string { return noderun.Binary(t) }

// process starts chart-upgrader as a separate process for node n.
func (f *fixture) process(n node, env []string, command string, args ...string) *exec.Cmd {
	cmd := n.Command(f.t, f.env, command, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
