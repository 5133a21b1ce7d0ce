package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// targetRef names a ManagedChart of the fixture as --target wants it.
func (f *fixture) targetRef(name string) string { return "managedchart/" + f.ns + "/" + name }

// upgradeOpts are the in-process options of an upgrade of one target of
// the fixture to version (policy may be "").
func (f *fixture) upgradeOpts(name, version, policy string) app.Options {
	return app.Options{Target: f.targetRef(name), ChartSource: f.charts, Version: version, PolicyFile: policy,
		Timeout: 60 * time.Second}
}

// patchManagedChart applies a JSON merge patch to a ManagedChart, as
// another writer (a person, another tool) would.
func (f *fixture) patchManagedChart(ctx context.Context, name, patch string) {
	f.t.Helper()
	_, err := f.env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(f.ns).
		Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "someone-else"})
	require.NoError(f.t, err)
}

// awaitObserved waits, by watch, until cond holds for what the cluster
// shows of the ManagedChart and its Bundle. The
// deadline only detects hangs.
func (f *fixture) awaitObserved(name, what string, cond func(*managedchart.ManagedChart, *managedchart.Bundle) bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 60*time.Second)
	defer cancel()
	obs, err := f.tc.Observe(ctx, f.ns, name)
	require.NoError(f.t, err)
	for {
		mc, b := obs.Snapshot()
		if mc != nil && cond(mc, b) {
			return
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("waiting for %s of %s: %v", what, name, ctx.Err())
		case <-obs.Changed():
		}
	}
}

// bundleSettled: the Bundle has observed its generation.
func bundleSettled(b *managedchart.Bundle) bool {
	return b != nil && b.Status.ObservedGeneration == b.Generation
}

// bundleNotReady: the Bundle, settled, says it is not Ready.
func bundleNotReady(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
	if !bundleSettled(b) {
		return false
	}
	c, ok := b.Status.Condition("Ready")
	return ok && c.Status == "False"
}

// lineHolding returns the line of msg that holds want, failing when none does.
func lineHolding(t *testing.T, msg, want string) string {
	t.Helper()
	for _, l := range strings.Split(msg, "\n") {
		if strings.Contains(l, want) {
			return l
		}
	}
	t.Errorf("no line holds %q in:\n%s", want, msg)
	return ""
}

// lastLineOf is the last non-empty line of s.
func lastLineOf(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// assertRefusedUntouched checks an upgrade refused with exit 3 that wrote
// nothing: no request that writes, the spec and annotations as before, no
// backup, no Lease.
func assertRefusedUntouched(t *testing.T, f *fixture, name string, before *managedchart.ManagedChart, err error, logs string, wc *writeCounter) {
	t.Helper()
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitRefused, outcome.Code(err), "error: %v\nlogs: %s", err, logs)
	t.Logf("refused: %v", err)
	assert.Zero(t, wc.writes.Load(), "a refused upgrade wrote: %v", wc.seen)
	assertUnchanged(t, before, f.get(name))
	assert.Empty(t, f.backups(name), "a refused upgrade wrote a backup")
	assert.False(t, f.leaseExists(name), "a refused upgrade created the lease")
}

func TestRefuseNotReadyTarget(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	// someone changes a value and the new deployment never becomes ready
	f.sim.SetFault(f.ns, name, fleetsim.Fault{NeverReady: true})
	// (without a Helm timeout, so Fleet reports it NotReady rather than
	// waiting inside Helm)
	f.patchManagedChart(t.Context(), name, `{"spec":{"timeoutSeconds":null,"values":{"extra":{"note":"changed by hand"}}}}`)
	f.awaitObserved(name, "a not-ready bundle", func(mc *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleNotReady(mc, b) && b.Status.Summary.NotReady == 1
	})
	before := f.get(name)

	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)))
	assertRefusedUntouched(t, f, name, before, err, logs, wc)
	l := lineHolding(t, err.Error(), "is not Ready")
	assert.Contains(t, l, "bundle mcc-"+name)
	assert.Contains(t, err.Error(), "fix it before upgrading")
	assert.Contains(t, err.Error(), "not ready", "the non-ready resource is named")
}

func TestRefuseErrApplied(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	const msg = "simulated: helm upgrade failed: configmaps is forbidden"
	f.sim.SetFault(f.ns, name, fleetsim.Fault{ErrApplied: msg})
	f.awaitObserved(name, "ErrApplied", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.Status.Summary.ErrApplied > 0
	})
	before := f.get(name)

	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)))
	assertRefusedUntouched(t, f, name, before, err, logs, wc)
	assert.Contains(t, lineHolding(t, err.Error(), "ErrApplied"), "bundle mcc-"+name+": 1 cluster(s) in ErrApplied")
	// the offending resource from the Bundle status, with Fleet's message
	l := lineHolding(t, err.Error(), f.ns+"/"+fleetsim.LocalCluster+" (ErrApplied)")
	assert.Contains(t, l, msg)
}

func TestRefuseModified(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.editConfigMap(name, "replicaCount", "9")
	f.awaitModified(name)
	before := f.get(name)

	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)))
	assertRefusedUntouched(t, f, name, before, err, logs, wc)
	// no live rule reads the ConfigMap: the drift is a reason to refuse
	l := lineHolding(t, err.Error(), "ConfigMap "+f.ns+"/"+name+"-config")
	assert.Contains(t, l, "was changed in the cluster", "the drifted resource is listed")
	assert.Contains(t, l, `{"data":{"replicaCount":"2"}}`, "with Fleet's patch")
}

func TestRefusePausedBySomeoneElseUnlessUnpause(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.patchManagedChart(t.Context(), name, `{"spec":{"paused":true}}`)
	f.awaitObserved(name, "a paused bundle", func(_ *managedchart.ManagedChart, b *managedchart.Bundle) bool {
		return bundleSettled(b) && b.Paused
	})
	before := f.get(name)
	require.True(t, before.Paused)

	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)))
	assertRefusedUntouched(t, f, name, before, err, logs, wc)
	l := lineHolding(t, err.Error(), "paused by someone else")
	assert.Contains(t, l, "--unpause")
	assert.Contains(t, l, managedchart.AnnotationPaused)

	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--unpause")...)
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	mc := f.get(name)
	assert.Equal(t, "2.0.0", mc.Version)
	assert.False(t, mc.Paused, "--unpause leaves the target unpaused")
	assert.Equal(t, "2.0.0", mc.Annotations[managedchart.AnnotationVersion])
	assert.Equal(t, mc.ValuesHash(), mc.Annotations[managedchart.AnnotationValuesHash])
	b, err := f.tc.Bundle(t.Context(), f.ns, name)
	require.NoError(t, err)
	assert.False(t, b.Paused, "the bundle follows")
}

// A release Fleet's agent left pending is Fleet's to heal (its agent rolls
// back and upgrades again): preflight reports it and goes ahead, and
// chart-upgrader never writes the release.
func TestAPendingReleaseUnderFleetIsReportedNotRefused(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	// Helm's storage: Secrets labelled owner=helm,name=<release>,version=N
	secrets := f.env.Kube().CoreV1().Secrets(f.ns)
	list, err := secrets.List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	require.NoError(t, err)
	require.NotEmpty(t, list.Items, "no helm release records of %s", name)
	newest, version := "", -1
	for _, s := range list.Items {
		if v, err := strconv.Atoi(s.Labels["version"]); err == nil && v > version {
			newest, version = s.Name, v
		}
	}
	_, err = secrets.Patch(t.Context(), newest, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"status":"pending-upgrade"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)))
	require.NoError(t, err, logs)
	l := lineHolding(t, logs, "pending-upgrade")
	assert.Contains(t, l, "helm release "+f.ns+"/"+name+" revision "+strconv.Itoa(version)+" is pending-upgrade (left by Fleet's agent")
	assert.Contains(t, l, "Fleet's agent heals it")
	for _, w := range wc.seen {
		assert.NotContains(t, w, "/secrets/"+newest, "the release record is Fleet's: never written")
	}
}

// A Bundle that matches no cluster (desiredReady 0) reads as Ready to
// Fleet, and no rollout of it could ever be seen: preflight refuses it,
// naming it, instead of an upgrade that would wait until its timeout.
func TestRefuseABundleWithNoCluster(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	f.sim.SetFault(f.ns, name, fleetsim.Fault{NoClusters: true})
	require.Eventually(t, func() bool {
		b, err := f.env.Dynamic().Resource(managedchart.BundleGVR).Namespace(f.ns).Get(t.Context(), managedchart.BundleName(name), metav1.GetOptions{})
		return err == nil && managedchart.ParseBundle(b).Status.Summary.DesiredReady == 0
	}, 30*time.Second, 50*time.Millisecond, "the Bundle summarises no cluster")
	before := f.get(name)

	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", f.policy(name)))
	assertRefusedUntouched(t, f, name, before, err, logs, wc)
	l := lineHolding(t, err.Error(), "desiredReady 0")
	assert.Contains(t, l, "bundle "+managedchart.BundleName(name)+" matches no cluster (desiredReady 0)")
	assert.Contains(t, l, "check the ManagedChart's targets")
}

func TestRefuseDowngradeUnlessAllowed(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "2.0.0", example.UserValues())
	before := f.get(name)

	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "1.0.0", ""))
	assertRefusedUntouched(t, f, name, before, err, logs, wc)
	l := lineHolding(t, err.Error(), "is a downgrade")
	assert.Contains(t, l, "2.0.0 → 1.0.0")
	assert.Contains(t, l, "--allow-downgrade")

	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "1.0.0", "", "--allow-downgrade")...)
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	mc := f.get(name)
	assert.Equal(t, "1.0.0", mc.Version)
	assert.Equal(t, "1.0.0", mc.Annotations[managedchart.AnnotationVersion])
	assert.Equal(t, "registry.example.com/demo/app:v1.0.0", f.configMap(name + "-config")["image"])
	bk := f.backups(name)
	require.Len(t, bk, 1)
	assert.Equal(t, managedchart.BackupName(name, "2.0.0"), bk[0].Name)
}

func TestRefuseReadonlyChangedByMigration(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	policy := f.writeFile("policy.yaml", `rules:
- {path: "promote.**", policy: readonly}
migrations:
- {name: new-dns, from: "<2.0.0", to: ">=2.0.0", expr: '.promote.clusterDNS = "10.43.0.10"'}
`)
	before := f.get(name)

	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", policy))
	assertRefusedUntouched(t, f, name, before, err, logs, wc)
	l := lineHolding(t, err.Error(), "promote.clusterDNS")
	assert.Contains(t, l, "10.53.0.10")
	assert.Contains(t, l, "10.43.0.10")
	assert.Contains(t, err.Error(), "new-dns", "the migration is named")
}

func TestRefuseMissingTarget(t *testing.T) {
	f := newFixture(t)
	name := release()
	logs, wc, err := f.upgradeCounting(f.node, f.upgradeOpts(name, "2.0.0", ""))
	require.Error(t, err, logs)
	assert.Equal(t, outcome.ExitRefused, outcome.Code(err), "error: %v", err)
	assert.Zero(t, wc.writes.Load(), "writes: %v", wc.seen)
	assert.Contains(t, lineHolding(t, err.Error(), "not found"), "managedchart "+f.ns+"/"+name)
	assert.False(t, f.leaseExists(name))

	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", "")...)
	assert.Equal(t, outcome.ExitRefused, r.Code, r.Stderr)
	assert.Contains(t, lastLineOf(r.Stderr), "not found")
}

func TestBadInputExitsTwoAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	before := f.get(name)
	spec := f.writeFile("spec.yaml", fmt.Sprintf(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: ManagedChart, namespace: %s, name: %s}
  chart: {name: demo-app, source: %s}
  colour: blue
`, f.ns, name, f.charts))

	for _, tc := range []struct {
		name string
		args []string
		want []string // in the last line of stderr
	}{
		{"unknown field in the spec", []string{"--spec", spec, "--version", "2.0.0"}, []string{spec + ":6", "charts[1].colour", "unknown field"}},
		{"target in a bad format", []string{"--target", "managedchart/" + name, "--chart-source", f.charts, "--version", "2.0.0"},
			[]string{"--target", "managedchart/" + name, "KIND/NAMESPACE/NAME"}},
		{"no chart source", []string{"--target", f.targetRef(name), "--version", "2.0.0"}, []string{"--chart-source"}},
		{"version not in the chart source", f.upgradeArgs(name, "9.9.9", ""), []string{`"9.9.9" not found`, f.charts, "1.0.0", "2.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.cli(f.node, "upgrade", tc.args...)
			assert.Equal(t, outcome.ExitBadInput, r.Code, "stderr: %s", r.Stderr)
			l := lastLineOf(r.Stderr)
			assert.True(t, strings.HasPrefix(l, "chart-upgrader: "), l)
			for _, w := range tc.want {
				assert.Contains(t, l, w)
			}
		})
	}
	assertUnchanged(t, before, f.get(name))
	assert.Empty(t, f.backups(name))
	assert.False(t, f.leaseExists(name))
}
