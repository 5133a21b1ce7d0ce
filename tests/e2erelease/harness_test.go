// Package e2erelease runs chart-upgrader on plain Helm 3 releases, on a
// control plane whose workloads really roll out (tests/testenv's workloads
// mode: kube-controller-manager, kube-scheduler, KWOK nodes): a Deployment
// makes a ReplicaSet, its pods are scheduled and become Ready, or are held
// not ready so that a rollout stalls.
package e2erelease

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Workloads: true, AuditLog: true})
}

var releaseSeq atomic.Int64

// releaseName is unique in the test binary: the example chart's
// StorageClass is cluster-scoped and named after the release.
func releaseName() string { return fmt.Sprintf("rel%d", releaseSeq.Add(1)) }

type fixture struct {
	t      *testing.T
	env    *testenv.Env
	ns     string
	charts string // demo-app 1.0.0 and 2.0.0, each with a Deployment
	root   string
	rc     *helmrelease.Client
	helm   *cluster.HelmGetter
}

// newFixture copies the example charts and adds a Deployment to both
// versions (testchart.DeploymentTemplate), so that every release has a
// workload that really rolls out; hold2, when set, holds 2.0.0's pods in
// that state.
func newFixture(t *testing.T, hold2 string) *fixture {
	t.Helper()
	env := testenv.ForTest(t)
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	f := &fixture{t: t, env: env, ns: env.Namespace(t), charts: t.TempDir(), root: root,
		rc: &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}, helm: cluster.NewHelmGetter(env.Config())}
	require.NoError(t, example.CopyDir(filepath.Join(root, "package", "examples", "charts"), f.charts))
	for _, v := range []string{"1.0.0", "2.0.0"} {
		dir := filepath.Join(f.charts, "demo-app-"+v)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "deployment.yaml"), []byte(testchart.DeploymentTemplate), 0o644))
	}
	if hold2 != "" {
		f.addValues("2.0.0", map[string]any{"hold": hold2})
	}
	return f
}

// addValues appends default values to the example chart at version.
func (f *fixture) addValues(version string, v map[string]any) {
	f.t.Helper()
	path := filepath.Join(f.charts, "demo-app-"+version, "values.yaml")
	data, err := os.ReadFile(path)
	require.NoError(f.t, err)
	extra, err := yaml.Marshal(v)
	require.NoError(f.t, err)
	require.NoError(f.t, os.WriteFile(path, append(append(data, '\n'), extra...), 0o644))
}

// installerValues is package/examples/values.yaml.
func (f *fixture) installerValues() map[string]any {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.root, "package", "examples", "values.yaml"))
	require.NoError(f.t, err)
	var v map[string]any
	require.NoError(f.t, yaml.Unmarshal(data, &v))
	return v
}

// install installs the example chart 1.0.0 as release name with the
// installer's values, the way `helm install` does (the same SDK action,
// Secrets storage, its labels).
func (f *fixture) install(name string) *release.Release {
	f.t.Helper()
	return f.installWith(name, nil, true)
}

// installClientSide installs as install does, client-side, as Helm 3
// did (the release records no apply method, its objects are Updates).
func (f *fixture) installClientSide(name string) *release.Release {
	f.t.Helper()
	return f.installAs(name, nil, true, false)
}

// installWith installs with extra values over the installer's; wait
// waits for the objects to be ready, as helm install --wait.
func (f *fixture) installWith(name string, extra map[string]any, wait bool) *release.Release {
	f.t.Helper()
	return f.installAs(name, extra, wait, true)
}

// installAs installs as installWith does, server-side or not.
func (f *fixture) installAs(name string, extra map[string]any, wait, serverSide bool) *release.Release {
	f.t.Helper()
	cfg, err := cluster.HelmConfiguration(f.helm, f.ns, "secret", nil)
	require.NoError(f.t, err)
	ch, err := loader.Load(filepath.Join(f.charts, "demo-app-1.0.0"))
	require.NoError(f.t, err)
	in := action.NewInstall(cfg)
	// as helm install (v4) does: server-side, as field manager "helm"
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout = name, f.ns, kube.HookOnlyStrategy, 60e9
	in.ServerSideApply = serverSide
	if wait {
		in.WaitStrategy = kube.StatusWatcherStrategy
	}
	vals := f.installerValues()
	for k, v := range extra {
		vals[k] = v
	}
	res, err := in.RunWithContext(f.t.Context(), ch, vals)
	require.NoError(f.t, err)
	return res.(*release.Release)
}

// history reads the release's revisions, oldest first.
func (f *fixture) history(name string) []*release.Release {
	f.t.Helper()
	h, err := f.rc.History(f.ns, name, "secret")
	require.NoError(f.t, err)
	return h
}

func (f *fixture) target(name string) string { return "release/" + f.ns + "/" + name }

// policy is the example policy with its sources moved to the fixture's
// namespace and the release's StorageClass.
func (f *fixture) policy(name string) string {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.root, "package", "examples", "policy.yaml"))
	require.NoError(f.t, err)
	p := strings.NewReplacer("namespace: demo-system", "namespace: "+f.ns, "name: demo-app-longhorn", "name: "+name+"-longhorn").Replace(string(data))
	path := filepath.Join(f.t.TempDir(), "policy.yaml")
	require.NoError(f.t, os.WriteFile(path, []byte(p), 0o600))
	return path
}

// node is one chart-upgrader process's local side.
type node = noderun.Node

func newNode(t *testing.T, name string) node { return noderun.New(t, name) }

// result is what one run printed and returned.
type result = noderun.Result

// cli runs chart-upgrader in-process as node n.
func (f *fixture) cli(n node, command string, args ...string) result {
	f.t.Helper()
	r := n.Run(f.t.Context(), f.env, command, args...)
	return r
}

func (f *fixture) upgradeArgs(name, version string, extra ...string) []string {
	return append([]string{"--target", f.target(name), "--chart-source", f.charts, "--version", version,
		"--policy", f.policy(name), "--timeout", "60s"}, extra...)
}

// writesBy lists what chart-upgrader wrote in the fixture's namespace.
func (f *fixture) writesBy() []string { return noderun.Writes(f.t, f.env, f.ns) }

// writeTemplate adds a template to the example chart at version.
func writeTemplate(charts, version, name, body string) error {
	return os.WriteFile(filepath.Join(charts, "demo-app-"+version, "templates", name), []byte(body), 0o644)
}
