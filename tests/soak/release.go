package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	yaml "sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The release soak (-kind release): a plain Helm release whose chart has
// a pre-upgrade hook Job that KWOK holds running until the soak lets it
// complete. Each cycle upgrades to the other version; in most cycles the
// process is SIGKILLed while Helm waits for the hook, leaving the release
// pending-upgrade, and re-run (on another node when there is one), which
// must recover it. After every cycle: the last run exited 0, the newest
// revision is deployed at the wanted version, no revision is pending, and
// no release Secret was deleted (the spec keeps every revision).

const (
	releaseNamespace = "soak-release"
	releaseName      = "demo"
	hookName         = releaseName + "-migrate"
)

// releaseWorld is the control plane in the workloads mode and the release.
type releaseWorld struct {
	env    *testenv.Env
	charts string
	spec   string
	rc     *helmrelease.Client
}

func startReleaseWorld(ctx context.Context, root, dir string) (*releaseWorld, error) {
	w := &releaseWorld{charts: filepath.Join(dir, "charts")}
	var err error
	if err = example.CopyDir(filepath.Join(root, "package", "examples", "charts"), w.charts); err != nil {
		return nil, err
	}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		for name, body := range map[string]string{"deployment.yaml": testchart.DeploymentTemplate, "migrate-hook.yaml": testchart.HookJobTemplate} {
			if err := os.WriteFile(filepath.Join(w.charts, "demo-app-"+v, "templates", name), []byte(body), 0o644); err != nil {
				return nil, err
			}
		}
	}
	if w.env, err = testenv.Start(ctx, testenv.Options{Workloads: true}); err != nil {
		return nil, err
	}
	w.rc = &helmrelease.Client{Kube: w.env.Kube(), Dynamic: w.env.Dynamic()}
	if _, err := w.env.Kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}, metav1.CreateOptions{}); err != nil {
		w.env.Stop()
		return nil, err
	}
	// every revision kept (historyMax 0): a deleted Secret is a violation
	w.spec = filepath.Join(dir, "release-spec.yaml")
	spec := "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n" +
		"- target: {kind: Release, namespace: " + releaseNamespace + ", name: " + releaseName + "}\n" +
		"  chart: {name: demo-app, source: " + w.charts + "}\n" +
		"  release: {historyMax: 0}\n  wait: {timeout: 90s}\n"
	if err := os.WriteFile(w.spec, []byte(spec), 0o644); err != nil {
		w.env.Stop()
		return nil, err
	}
	if err := w.install(ctx, root); err != nil {
		w.env.Stop()
		return nil, err
	}
	return w, nil
}

// install installs demo-app 1.0.0 as helm install (v4) does: the SDK,
// server-side, waiting for its objects.
func (w *releaseWorld) install(ctx context.Context, root string) error {
	data, err := os.ReadFile(filepath.Join(root, "package", "examples", "values.yaml"))
	if err != nil {
		return err
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return err
	}
	cfg, err := cluster.HelmConfiguration(cluster.NewHelmGetter(w.env.Config()), releaseNamespace, cluster.SecretDriver, nil)
	if err != nil {
		return err
	}
	ch, err := loader.Load(filepath.Join(w.charts, "demo-app-1.0.0"))
	if err != nil {
		return err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.WaitStrategy, in.Timeout, in.ServerSideApply = releaseName, releaseNamespace, kube.StatusWatcherStrategy, 90*time.Second, true
	_, err = in.RunWithContext(ctx, ch, vals)
	return err
}

// hookPod waits (within limit) for a Running pod of the hook Job that is
// not one of seen, and returns its name; "" when none came.
func (w *releaseWorld) hookPod(ctx context.Context, seen map[string]bool, limit time.Duration, running func() bool) string {
	end := time.Now().Add(limit)
	for time.Now().Before(end) && ctx.Err() == nil && running() {
		pods, err := w.env.Kube().CoreV1().Pods(releaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + hookName})
		if err == nil {
			for _, p := range pods.Items {
				if !seen[p.Name] && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					return p.Name
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ""
}

// secrets names the release's storage Secrets.
func (w *releaseWorld) secrets(ctx context.Context) (map[string]bool, error) {
	list, err := w.env.Kube().CoreV1().Secrets(releaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + releaseName})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range list.Items {
		out[s.Name] = true
	}
	return out, nil
}

// releaseSoak is the state of a release soak.
type releaseSoak struct {
	s       *soak
	w       *releaseWorld
	version string
	// killed counts the processes SIGKILLed while Helm waited for the
	// hook; stuck the cycles that ended with the newest revision pending
	stuck, killed, cycles int
	secrets               map[string]bool
}

// runRelease is the release soak: setup, cycles until end, the summary.
func (s *soak) runRelease(ctx context.Context, root string, end time.Time) error {
	fmt.Fprintln(s.out, "soak: starting kube-apiserver + etcd with the workload controllers and KWOK; installing release demo 1.0.0")
	w, err := startReleaseWorld(ctx, root, s.dir)
	if err != nil {
		return err
	}
	defer w.env.Stop()
	r := &releaseSoak{s: s, w: w, version: "1.0.0"}
	if r.secrets, err = w.secrets(ctx); err != nil {
		return err
	}
	for n := 1; time.Until(end) > 45*time.Second && ctx.Err() == nil; n++ {
		r.cycle(ctx, n)
	}
	if r.cycles == 0 {
		return fmt.Errorf("no release cycle ran before the end")
	}
	fmt.Fprintf(s.out, "soak: release: %d cycles, %d processes SIGKILLed while Helm waited for the hook, %d releases left stuck, %d invariant violations %v\n",
		r.cycles, r.killed, r.stuck, s.total(), s.violations)
	return nil
}

// cycle upgrades to the other version, killing the process in Helm's hook
// wait with probability 2/3, then re-runs until one run ends; it checks
// the invariants.
func (r *releaseSoak) cycle(ctx context.Context, n int) {
	s, w := r.s, r.w
	rng := rand.New(rand.NewPCG(uint64(s.seed), uint64(n)))
	to := map[string]string{"1.0.0": "2.0.0", "2.0.0": "1.0.0"}[r.version]
	args := func(nd node) []string {
		return []string{"upgrade", "--skip-image-check", "--spec", w.spec, "--version", to, "--allow-downgrade", "--lease-duration", "2s",
			"--kubeconfig", w.env.KubeconfigPath(), "--state-dir", nd.stateDir, "--lock-file", nd.lockFile,
			"--termination-log", nd.termLog, "--log-format", "json", "--node-name", nd.name}
	}
	r.cycles++
	violate := func(kind, detail string) {
		s.violations[kind]++
		fmt.Fprintf(s.out, "soak: release cycle %d: VIOLATION %s: %s\n", n, kind, detail)
	}
	seen := map[string]bool{}
	nd := s.nodes[rng.IntN(len(s.nodes))]
	kill := rng.IntN(3) < 2
	var last *procRun
	for attempt := 0; attempt < 4; attempt++ {
		label := fmt.Sprintf("release cycle %d %s (run %d)", n, nd.name, attempt+1)
		p := startProc(ctx, s.bin, nd, label, nil, 3*time.Minute, filepath.Join(s.dir, fmt.Sprintf("release-%03d-%d.log", n, attempt+1)), args(nd)...)
		pod := w.hookPod(ctx, seen, 60*time.Second, p.running)
		if pod != "" {
			seen[pod] = true
			if kill && attempt == 0 {
				p.kill("soak")
				p.wait()
				r.killed++
				nd = s.nodes[(indexOf(s.nodes, nd)+1)%len(s.nodes)] // the re-run on another node, when there is one
				continue
			}
			if err := testenv.ReleaseHold(ctx, w.env.Kube(), releaseNamespace, pod); err != nil {
				violate("soak-error", err.Error())
			}
		}
		p.wait()
		last = p
		break
	}
	if last == nil || last.code != 0 {
		exit := "none"
		if last != nil {
			exit = last.exit() + ": " + last.tail(5)
		}
		violate("exit", fmt.Sprintf("the last run of the upgrade to %s did not end with exit 0: %s", to, exit))
	}
	hist, err := w.rc.History(releaseNamespace, releaseName, cluster.SecretDriver)
	if err != nil || len(hist) == 0 {
		violate("read", fmt.Sprintf("reading the release: %v", err))
		return
	}
	newest := hist[len(hist)-1]
	if helmrelease.IsPending(newest) {
		r.stuck++
		violate("stuck", fmt.Sprintf("revision %d is %s", newest.Version, newest.Info.Status))
	}
	if st := newest.Info.Status.String(); st != "deployed" || helmrelease.ChartVersion(newest) != to {
		violate("not-upgraded", fmt.Sprintf("newest revision %d is %s at %s, want deployed at %s", newest.Version, st, helmrelease.ChartVersion(newest), to))
	} else {
		r.version = to
	}
	var statuses []string
	for _, h := range hist[:len(hist)-1] {
		if helmrelease.IsPending(h) {
			violate("stuck", fmt.Sprintf("revision %d is %s under newer ones", h.Version, h.Info.Status))
		}
		statuses = append(statuses, h.Info.Status.String())
	}
	now, err := w.secrets(ctx)
	if err != nil {
		violate("read", err.Error())
		return
	}
	var gone []string
	for name := range r.secrets {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	if len(gone) > 0 {
		violate("secret-deleted", strings.Join(gone, ", "))
	}
	r.secrets = now
	fmt.Fprintf(s.out, "soak: release cycle %d: → %s, killed in the hook wait: %v, %d revisions, newest %d %s\n",
		n, to, kill, len(hist), newest.Version, newest.Info.Status)
}

// indexOf is the index of nd in nodes.
func indexOf(nodes []node, nd node) int {
	for i, x := range nodes {
		if x.name == nd.name {
			return i
		}
	}
	return 0
}
