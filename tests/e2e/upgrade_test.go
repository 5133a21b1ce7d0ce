package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

var releaseSeq atomic.Int64

// release returns a ManagedChart (and release) name unique in the test
// binary: the chart's StorageClass is cluster-scoped and named after it.
func release() string { return fmt.Sprintf("app%d", releaseSeq.Add(1)) }

// demoteStorageClass is what an operator does to make another
// StorageClass the default.
func (f *fixture) demoteStorageClass(name string) {
	f.t.Helper()
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	_, err := f.env.Kube().StorageV1().StorageClasses().Patch(f.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(f.t, err)
}

func TestUpgradeHappyPath(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	certBefore := f.secretData("demo-app-webhook-certs", "tls.crt")
	require.NotEmpty(t, certBefore)
	f.demoteStorageClass(name + "-longhorn")

	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)

	// the decision report and the phases
	for _, want := range []string{"webhook.image.tag", "follow #1", "drop", "storageClass.defaultStorageClass", "live #4",
		"promote.clusterPodCIDR", "readonly #3", "webhook.certs.cert", "once #5",
		"upgraded managedchart/" + f.ns + "/" + name + " 1.0.0 → 2.0.0"} {
		assert.Contains(t, r.Stdout, want)
	}
	for _, p := range []string{"resolve", "preflight", "merge", "apply", "wait", "verify"} {
		assert.Contains(t, r.Stderr, `"msg":"phase done","target":"managedchart/`+f.ns+"/"+name+`","phase":"`+p+`"`)
	}

	// the annotations are the cluster-wide record
	mc := f.get(name)
	assert.Equal(t, "2.0.0", mc.Version)
	assert.Equal(t, "2.0.0", mc.Annotations[managedchart.AnnotationVersion])
	assert.Equal(t, mc.ValuesHash(), mc.Annotations[managedchart.AnnotationValuesHash])
	assert.Equal(t, "1.0.0", mc.Annotations[managedchart.AnnotationPreviousVersion])
	assert.NotEmpty(t, mc.Annotations[managedchart.AnnotationAppliedAt])
	assert.False(t, mc.Paused)

	// every docs/design.md §1 problem, end to end, in what Helm deployed
	cm := f.configMap(name + "-config")
	assert.Equal(t, "registry.example.com/demo/webhook:v0.5.6", cm["webhookImage"], "the pinned tag followed the chart")
	assert.Equal(t, "10.52.0.0/16", cm["clusterPodCIDR"], "readonly CIDR kept although 2.0.0's default is 10.42.0.0/16")
	assert.Equal(t, "10.53.0.10", cm["clusterDNS"])
	assert.Equal(t, "2", cm["replicaCount"], "a user customisation kept")
	assert.Equal(t, `{"cpu":"250m","memory":"512Mi"}`, cm["requests"], "max kept 512Mi, took the new 250m")
	assert.NotContains(t, cm, "kubeVipAddress", "the migration removed kubeVip.config")
	assert.Equal(t, certBefore, f.secretData("demo-app-webhook-certs", "tls.crt"), "once kept the certificate byte for byte")
	sc, err := f.env.Kube().StorageV1().StorageClasses().Get(t.Context(), name+"-longhorn", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "false", sc.Annotations["storageclass.kubernetes.io/is-default-class"])
	got, _ := mc.Values["storageClass"].(map[string]any)
	assert.Equal(t, false, got["defaultStorageClass"], "live wrote false although the ManagedChart said true")

	// one backup of the spec from before, the termination log, Events
	bk := f.backups(name)
	require.Len(t, bk, 1)
	assert.Equal(t, managedchart.BackupName(name, "1.0.0"), bk[0].Name)
	var spec map[string]any
	require.NoError(t, yaml.Unmarshal(bk[0].Data[specobject.BackupKeySpec], &spec))
	assert.Equal(t, "1.0.0", spec["version"])
	term, err := os.ReadFile(f.node.TermLog)
	require.NoError(t, err)
	assert.Contains(t, string(term), "ok: upgraded")
	events, err := f.env.Kube().CoreV1().Events(f.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	reasons := map[string]bool{}
	for _, e := range events.Items {
		reasons[e.Reason] = true
		assert.NotContains(t, e.Message, string(certBefore[:40]))
	}
	for _, want := range []string{"PhaseResolve", "PhaseMerge", "PhaseApply", "PhaseWait", "PhaseVerify"} {
		assert.True(t, reasons[want], "event %s missing (have %v)", want, reasons)
	}
	assert.False(t, f.leaseHeld(name), "the lease is released")
}

func (f *fixture) leaseHeld(name string) bool {
	l, err := f.env.Kube().CoordinationV1().Leases(f.ns).Get(f.t.Context(), "chart-upgrader-"+name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
}

func TestRerunAfterSuccessMakesNoWrites(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	opts := app.Options{Target: "managedchart/" + f.ns + "/" + name, ChartSource: f.charts, Version: "2.0.0",
		PolicyFile: f.policy(name)}
	logs, first, err := f.upgradeCounting(f.node, opts)
	require.NoError(t, err, logs)
	assert.Greater(t, first.writes.Load(), int64(0))
	before := f.get(name)

	logs, again, err := f.upgradeCounting(f.node, opts)
	require.NoError(t, err, logs)
	assert.Zero(t, again.writes.Load(), "a re-run wrote: %v", again.seen)
	assert.Contains(t, logs, "nothing to do")
	assertUnchanged(t, before, f.get(name))
	term, err := os.ReadFile(f.node.TermLog)
	require.NoError(t, err)
	assert.Equal(t, "ok: managedchart/"+f.ns+"/"+name+" is at 2.0.0 and ready: nothing to do\n", string(term),
		"the termination message says what the re-run did")

	// another node, with its own journal, knows from the annotations
	logs, other, err := f.upgradeCounting(noderun.New(t, "node-2"), opts)
	require.NoError(t, err, logs)
	assert.Zero(t, other.writes.Load(), "another node wrote: %v", other.seen)
	t.Logf("writes: first run %d (%v), re-run %d, other node %d", first.writes.Load(), first.seen, again.writes.Load(), other.writes.Load())
}

func TestOnceWithoutTheRuleTheCertificateChanges(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	certBefore := f.secretData("demo-app-webhook-certs", "tls.crt")
	policy := f.writeFile("policy.yaml", "rules:\n- {path: \"**.image.tag\", policy: follow}\n")
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", policy)...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "regenerated-data")
	assert.Contains(t, r.Stdout, "templates/webhook-certs.yaml")
	assert.NotEqual(t, certBefore, f.secretData("demo-app-webhook-certs", "tls.crt"), "without a once rule the chart regenerates the certificate")
}

func TestFollowRefreshesAPinnedTagButKeepsACustomisation(t *testing.T) {
	f := newFixture(t)
	name := release()
	vals := example.UserValues()
	vals["image"] = map[string]any{"tag": "v1.0.0-hotfix"} // a real customisation
	f.install(name, "1.0.0", vals)
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	cm := f.configMap(name + "-config")
	assert.Equal(t, "registry.example.com/demo/webhook:v0.5.6", cm["webhookImage"])
	assert.Equal(t, "registry.example.com/demo/app:v1.0.0-hotfix", cm["image"])
	assert.Contains(t, r.Stdout, "shadowed-default")
}

func TestReadonlyViolationIsRefusedWithoutWrites(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	before := f.get(name)
	logs, wc, err := f.upgradeCounting(f.node, app.Options{Target: "managedchart/" + f.ns + "/" + name,
		ChartSource: f.charts, Version: "2.0.0", PolicyFile: f.policy(name), Explicit: app.Explicit{Set: []string{"promote.clusterPodCIDR=10.99.0.0/16"}}})
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err), logs)
	assert.Contains(t, err.Error(), "promote.clusterPodCIDR")
	assert.Zero(t, wc.writes.Load(), "writes: %v", wc.seen)
	assertUnchanged(t, before, f.get(name))
	assert.Empty(t, f.backups(name))
	assert.False(t, f.leaseExists(name))
}

func TestLiveStorageClassUnchangedKeepsTrue(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	sc, err := f.env.Kube().StorageV1().StorageClasses().Get(t.Context(), name+"-longhorn", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", sc.Annotations["storageclass.kubernetes.io/is-default-class"])
}

func exitCode(err error) int {
	return outcomeCode(err)
}

// TestRequestsDoNotGrowWithTheWait upgrades once with a short and once with
// a long readiness delay, with a Lease short enough to be renewed every
// second if it were held: the wait is one list and one watch per kind, the
// Lease is given up once the apply is recorded, so the longer wait costs no
// request (holding the Lease through it would cost two a second).
func TestRequestsDoNotGrowWithTheWait(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	run := func(version string, delay time.Duration) []string {
		t.Helper()
		f.sim.SetFault(f.ns, name, fleetsim.Fault{Delay: delay})
		opts := app.Options{Target: "managedchart/" + f.ns + "/" + name, ChartSource: f.charts, Version: version,
			PolicyFile: f.policy(name), AllowDowngrade: true, LeaseDuration: 3 * time.Second}
		logs, wc, err := f.upgradeCounting(f.node, opts)
		require.NoError(t, err, logs)
		assert.Contains(t, logs, `"phase":"wait","duration"`)
		return wc.requests()
	}
	short := run("2.0.0", time.Second)
	long := run("1.0.0", 7*time.Second)
	t.Logf("requests: %d with a 1s wait, %d with a 7s wait\n%s", len(short), len(long), strings.Join(long, "\n"))
	// a conflict retried on the way (a status write between read and update)
	// may add a read and a write; a Lease held through the wait would add ~14
	assert.LessOrEqual(t, len(long), len(short)+2, "requests grew with the wait")
	assert.Equal(t, 2, countPrefix(long, "PUT /apis/coordination.k8s.io"), "the Lease is written to take it and to give it up, never renewed")
}

func countPrefix(xs []string, prefix string) int {
	n := 0
	for _, x := range xs {
		if strings.HasPrefix(x, prefix) {
			n++
		}
	}
	return n
}
