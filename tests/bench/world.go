package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// namespace holds the benchmarks' ManagedCharts, as in Harvester.
const namespace = "fleet-local"

// world is one control plane with an audit log, a Fleet simulator serving
// namespace, and a scratch directory for the runs' files.
type world struct {
	env      *testenv.Env
	sim      *fleetsim.Sim
	tc       *managedchart.Client
	examples string // package/examples
	chartDir string // the charts: examples' charts, or their weighted copy
	dir      string
	// local is where chart-upgrader's state directory (the journal), lock
	// and termination log go: dir unless set.
	local   string
	stopSim func() // stops the simulator and waits for it
}

// startWorld starts the control plane and a simulator of clusters
// downstream clusters. Call stop.
func startWorld(ctx context.Context, clusters int) (*world, error) {
	return startWorldOf(ctx, clusters, false)
}

// startWorldOf is startWorld; weighted gives the example charts the
// twelve objects of a chart of real size (weightedCharts).
func startWorldOf(ctx context.Context, clusters int, weighted bool) (*world, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	w := &world{examples: filepath.Join(root, "package", "examples")}
	w.chartDir = filepath.Join(w.examples, "charts")
	if w.dir, err = os.MkdirTemp("", "chart-upgrader-bench-"); err != nil {
		return nil, err
	}
	if weighted {
		w.chartDir = filepath.Join(w.dir, "charts")
		if err := weightedCharts(filepath.Join(w.examples, "charts"), filepath.Join(root, "tests", "bench", "testdata", "weight"), w.chartDir); err != nil {
			_ = os.RemoveAll(w.dir)
			return nil, err
		}
	}
	opts := testenv.Options{AuditLog: true}
	if clusters > 20000 {
		opts.EtcdQuotaBytes = 8 << 30 // their history passes the default 2 GiB
	}
	if w.env, err = testenv.Start(ctx, opts); err != nil {
		_ = os.RemoveAll(w.dir)
		return nil, err
	}
	w.tc = &managedchart.Client{Dynamic: w.env.Dynamic(), Kube: w.env.Kube()}
	if w.sim, w.stopSim, err = fleetsim.Start(ctx, fleetsim.Options{Config: w.env.Config(), Namespace: namespace, Clusters: clusters,
		Loader: fleetsim.DirLoader(w.charts())}); err != nil {
		w.stop()
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := w.env.Kube().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		w.stop()
		return nil, fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	return w, nil
}

// stop stops the world; a second call does nothing.
func (w *world) stop() {
	if w.stopSim != nil {
		w.stopSim()
		w.stopSim = nil
	}
	if w.env != nil {
		_ = w.env.Stop()
		w.env = nil
	}
	_ = os.RemoveAll(w.dir)
}

// charts is the chart directory: the bundled example's demo-app 1.0.0 and
// 2.0.0, or their weighted copy.
func (w *world) charts() string { return w.chartDir }

// weightedCharts copies each chart of dir to dst with the templates of
// weight (testdata/weight) added: demo-app's three objects and these nine
// make the dozen of a chart of real size, which every simulated cluster
// lists in its BundleDeployment's status.resources.
func weightedCharts(dir, weight, dst string) error {
	extra, err := filepath.Glob(filepath.Join(weight, "*.yaml"))
	if err != nil || len(extra) == 0 {
		return fmt.Errorf("no weight templates in %s (%v)", weight, err)
	}
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		return fmt.Errorf("copying the charts of %s: %w", dir, err)
	}
	charts, err := os.ReadDir(dst)
	if err != nil {
		return err
	}
	for _, c := range charts {
		for _, t := range extra {
			data, err := os.ReadFile(t)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dst, c.Name(), "templates", "weight-"+filepath.Base(t)), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// auditEvents reads the audit log so far.
func (w *world) auditEvents() ([]testenv.AuditEvent, error) {
	return testenv.ReadAuditLog(w.env.AuditLogPath())
}

// release is one installed demo-app: ManagedChart namespace/name, Helm
// release name in releaseNS.
type release struct {
	name, releaseNS string
}

// create creates the ManagedChart of rel at version with the installer's
// values of the bundled example (package/examples/values.yaml), shaped as
// the demo and the end-to-end tests shape it.
func (w *world) create(ctx context.Context, rel release, version string) error {
	mc := fixture.ManagedChart(fixture.Install{Namespace: namespace, Name: rel.name, Version: version,
		ReleaseNamespace: rel.releaseNS, Values: fixture.UserValues()})
	if _, err := w.env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(namespace).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating managedchart %s/%s: %w", namespace, rel.name, err)
	}
	return nil
}

// waitReady waits by watch until rel is ready at version.
func (w *world) waitReady(ctx context.Context, rel release, version string, timeout time.Duration) error {
	_, err := fixture.WaitReady(ctx, w.env, namespace, rel.name, upgrade.Want{Version: version}, timeout)
	return err
}

// demote makes another StorageClass than rel's the default, as the
// operator of the demo did: the example policy's live rule then writes
// storageClass.defaultStorageClass=false.
func (w *world) demote(ctx context.Context, rel release) error {
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	_, err := w.env.Kube().StorageV1().StorageClasses().Patch(ctx, rel.name+"-longhorn", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("demoting StorageClass %s-longhorn: %w", rel.name, err)
	}
	return nil
}

// deploy creates rel at 1.0.0 with the installer's values, waits (at most
// timeout) until it is ready and demotes its StorageClass: where every
// benchmark starts.
func (w *world) deploy(ctx context.Context, rel release, timeout time.Duration) error {
	if err := w.create(ctx, rel, "1.0.0"); err != nil {
		return err
	}
	if err := w.waitReady(ctx, rel, "1.0.0", timeout); err != nil {
		return err
	}
	return w.demote(ctx, rel)
}

// upgradeArgs is the command line of one chart-upgrader upgrade of rel to
// version with the example policy and this world's cluster flags;
// downgrade adds --allow-downgrade.
func (w *world) upgradeArgs(rel release, to string, downgrade bool, timeout time.Duration) []string {
	return w.upgradeArgsOn("bench", rel, to, downgrade, timeout)
}

// upgradeArgsOn is upgradeArgs for a run on node (nodeArgs).
func (w *world) upgradeArgsOn(node string, rel release, to string, downgrade bool, timeout time.Duration) []string {
	args := []string{"upgrade", "--skip-image-check", "--target", "managedchart/" + namespace + "/" + rel.name, "--chart-source", w.charts(),
		"--version", to, "--policy", filepath.Join(w.examples, "policy.yaml"), "--timeout", timeout.String()}
	if downgrade {
		args = append(args, "--allow-downgrade")
	}
	return append(args, w.nodeArgs(node)...)
}

// version reads the spec.version of rel's ManagedChart.
func (w *world) version(ctx context.Context, rel release) (string, error) {
	mc, found, err := w.tc.Get(ctx, namespace, rel.name)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("managedchart %s/%s not found", namespace, rel.name)
	}
	return mc.Version, nil
}

// file writes a file into the scratch directory and returns its path.
func (w *world) file(name, content string) (string, error) {
	path := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(content), 0o644)
}

// toolArgs are the flags every chart-upgrader run of the benchmarks gets:
// the cluster, a state directory and lock of its own, JSON logs.
func (w *world) toolArgs() []string { return w.nodeArgs("bench") }

// nodeArgs are toolArgs for a run on node: a node other than "bench" has a
// state directory (journal, Lease identity), lock and termination log of
// its own, as the Job on each node of a cluster has.
func (w *world) nodeArgs(node string) []string {
	local := w.local
	if local == "" {
		local = w.dir
	}
	if node != "bench" {
		local = filepath.Join(local, "nodes", node)
	}
	return []string{"--kubeconfig", w.env.KubeconfigPath(), "--state-dir", filepath.Join(local, "state"),
		"--lock-file", filepath.Join(local, "upgrade.lock"), "--termination-log", filepath.Join(local, "termination-log"),
		"--node-name", node, "--log-format", "json"}
}

var errNoWait = errors.New("the simulator reported ready before the tool applied: the run did not wait")
