package e2erelease

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// hookPod waits for a Running pod of the release's hook Job other than
// not, and returns its name.
func (f *fixture) hookPod(name, not string) string {
	f.t.Helper()
	var found string
	require.Eventually(f.t, func() bool {
		pods, err := f.env.Kube().CoreV1().Pods(f.ns).List(f.t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + name + "-migrate"})
		if err != nil {
			f.t.Logf("listing the hook's pods: %v", err)
			return false
		}
		for _, p := range pods.Items {
			if p.Name != not && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				found = p.Name
				return true
			}
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "a running pod of the hook Job %s-migrate", name)
	return found
}

// releaseHold lets KWOK complete pod: the hook succeeds.
func (f *fixture) releaseHold(pod string) {
	f.t.Helper()
	require.NoError(f.t, testenv.ReleaseHold(f.t.Context(), f.env.Kube(), f.ns, pod))
}

// releaseSecrets names the release's storage Secrets.
func (f *fixture) releaseSecrets(name string) []string {
	f.t.Helper()
	list, err := f.env.Kube().CoreV1().Secrets(f.ns).List(f.t.Context(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	require.NoError(f.t, err)
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	return out
}

// A run SIGKILLed while Helm waits for the chart's pre-upgrade hook leaves
// its revision pending-upgrade. The next run, on another node, proves it
// is chart-upgrader's own interrupted apply (its record names that
// revision; the Lease of the killed run expired), marks it failed with an
// update conditional on what it read, and upgrades again from the last
// deployed revision: exit 0, the stuck revision failed in the history, a
// new revision deployed, no Secret deleted.
func TestAKilledApplyIsRecoveredOnAnotherNode(t *testing.T) {
	f := newFixture(t, "")
	require.NoError(t, writeTemplate(f.charts, "2.0.0", "migrate-hook.yaml", testchart.HookJobTemplate))
	name := releaseName()
	f.install(name)

	killed := newNode(t, "node-1").Command(t, f.env, "upgrade", f.upgradeArgs(name, "2.0.0", "--lease-duration", "3s")...)
	var out strings.Builder
	killed.Stdout, killed.Stderr = &out, &out
	require.NoError(t, killed.Start())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the killed run's output:\n%s", out.String())
			pods, err := f.env.Kube().CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{})
			t.Logf("pods (%v):", err)
			for _, p := range pods.Items {
				t.Logf("pod %s %s %v %v", p.Name, p.Status.Phase, p.Labels, p.Spec.NodeName)
			}
			jobs, err := f.env.Kube().BatchV1().Jobs(f.ns).List(context.Background(), metav1.ListOptions{})
			t.Logf("jobs (%v):", err)
			for _, j := range jobs.Items {
				t.Logf("job %s %+v", j.Name, j.Status)
			}
		}
	})
	first := f.hookPod(name, "")
	h := f.history(name)
	require.Len(t, h, 2)
	require.Equal(t, "pending-upgrade", h[1].Info.Status.String(), "Helm waits for the hook with the revision pending")
	require.NoError(t, killed.Process.Kill())
	_ = killed.Wait()
	require.Equal(t, "pending-upgrade", f.history(name)[1].Info.Status.String(), "SIGKILL left it pending")
	secrets := f.releaseSecrets(name)

	done := make(chan result, 1)
	go func() {
		done <- f.cli(newNode(t, "node-2"), "upgrade", f.upgradeArgs(name, "2.0.0", "--lease-duration", "3s")...)
	}()
	t.Cleanup(func() {
		select {
		case r := <-done:
			if t.Failed() {
				t.Logf("the re-run: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			}
		default:
		}
	})
	f.releaseHold(f.hookPod(name, first)) // the hook Helm runs again completes
	var r result
	select {
	case r = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the re-run did not end within 3 minutes")
	}
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout+r.Stderr, "interrupted-apply")
	assert.Contains(t, r.Stderr, "pending revision marked failed")

	h = f.history(name)
	require.Len(t, h, 3)
	assert.Equal(t, "superseded", h[0].Info.Status.String())
	assert.Equal(t, "failed", h[1].Info.Status.String(), "the stuck revision stays in the history, failed")
	assert.Contains(t, h[1].Info.Description, "marked failed by chart-upgrader at ")
	assert.Contains(t, h[1].Info.Description, "an interrupted apply of chart-upgrader's")
	assert.Equal(t, "deployed", h[2].Info.Status.String())
	assert.Equal(t, "2.0.0", h[2].Chart.Metadata.Version)
	assert.Equal(t, "1", h[2].Labels["chart-upgrader.io/from-revision"], "upgraded from the last deployed revision")
	for _, s := range secrets {
		_, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(t.Context(), s, metav1.GetOptions{})
		assert.NoError(t, err, "release Secret %s kept", s)
	}
}

// helm4 runs the Helm 4 CLI against the fixture's namespace and returns
// its command (not started).
func (f *fixture) helm4(args ...string) *exec.Cmd {
	f.t.Helper()
	bin, err := f.env.Binary("helm4")
	require.NoError(f.t, err)
	return f.helmCommand(bin, f.t.TempDir(), args...)
}

// `helm upgrade --wait` of the Helm 4 CLI, SIGKILLed while it waits, leaves
// another process's pending revision: chart-upgrader refuses it (exit 3,
// nothing written), naming the revision, its age, who wrote it, the last
// deployed revision and the ways out. With release.recoverPending.after
// and an age past it, it is marked failed and upgraded over.
func TestAnotherProcessesPendingRevisionIsRefusedThenRecovered(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)

	cli := f.helm4("upgrade", name, filepath.Join(f.charts, "demo-app-2.0.0"), "--reuse-values", "--set", "hold=not-ready", "--wait", "--timeout", "5m")
	var out strings.Builder
	cli.Stdout, cli.Stderr = &out, &out
	require.NoError(t, cli.Start())
	require.Eventually(t, func() bool {
		h := f.history(name)
		return len(h) == 2 && h[1].Info.Status.String() == "pending-upgrade"
	}, 60*time.Second, 100*time.Millisecond, "helm upgrade --wait waits with revision 2 pending: %s", &out)
	time.Sleep(time.Second) // into its wait
	require.NoError(t, cli.Process.Kill())
	_ = cli.Wait()
	require.Equal(t, "pending-upgrade", f.history(name)[1].Info.Status.String())

	before := len(f.writesBy())
	r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{
		"helm release " + f.ns + "/" + name + " revision 2 (chart 2.0.0) is pending-upgrade since ",
		" ago)", "written by a Helm client other than chart-upgrader",
		"the last deployed revision is 1 (chart 1.0.0)",
		"`helm rollback " + name + " 1 -n " + f.ns + "`", "release.recoverPending.after",
	} {
		assert.Contains(t, r.Stderr, want)
	}
	assert.Equal(t, before, len(f.writesBy()), "a refusal writes nothing")

	spec := f.specWith(name, "  release: {recoverPending: {after: 1s}}\n  wait: {timeout: 60s}\n")
	r = f.cli(newNode(t, "node-1"), "upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout+r.Stderr, "recover-pending")
	h := f.history(name)
	require.Len(t, h, 3)
	assert.Equal(t, "failed", h[1].Info.Status.String())
	assert.Contains(t, h[1].Info.Description, "pending longer than release.recoverPending.after (1s), no hook running")
	assert.Equal(t, "deployed", h[2].Info.Status.String())
	assert.Equal(t, "2.0.0", h[2].Chart.Metadata.Version)
	assert.NotContains(t, h[2].Config, "hold", "upgraded from the last deployed revision's values, not the stuck one's")
}

// A failed newest revision (a chart the API server rejects, upgraded with
// the Helm 4 CLI) is upgraded over, as helm upgrade does: from the last
// deployed revision, reported as the "from" version, with a warning naming
// the failed one.
func TestAFailedRevisionIsUpgradedOver(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	cli := f.helm4("upgrade", name, filepath.Join(f.charts, "demo-app-1.0.0"), "--reuse-values", "--set", "replicas=-1")
	out, err := cli.CombinedOutput()
	require.Error(t, err, "the API server rejects replicas -1: %s", out)
	h := f.history(name)
	require.Len(t, h, 2)
	require.Equal(t, "failed", h[1].Info.Status.String())

	r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout+r.Stderr, "failed-revision")
	assert.Contains(t, r.Stdout+r.Stderr, "revision 2 (chart 1.0.0) is failed: the upgrade starts from revision 1 (chart 1.0.0), the last deployed one")
	assert.Contains(t, r.Stdout, "1.0.0 → 2.0.0")
	h = f.history(name)
	require.Len(t, h, 3)
	assert.Equal(t, "failed", h[1].Info.Status.String(), "the failed revision stays")
	assert.Equal(t, "deployed", h[2].Info.Status.String())
	assert.NotContains(t, h[2].Config, "replicas", "the failed revision's values are not the base")
}
