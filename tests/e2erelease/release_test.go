package e2erelease

import (
	"sigs.k8s.io/yaml"

	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/plainrelease"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func (f *fixture) demoteStorageClass(name string) {
	f.t.Helper()
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	_, err := f.env.Kube().StorageV1().StorageClasses().Patch(f.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(f.t, err)
}

// The demo upgrade of a plain Helm release: every decision of the demo
// policy in the new revision's values, Helm's own storage as written by
// `helm install` read correctly, the record in the revision's labels, the
// Deployment really rolled out; then status, and a re-run that writes
// nothing.
func TestUpgradeARelease(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	installed := f.install(name)
	s, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(t.Context(), "sh.helm.release.v1."+name+".v1", metav1.GetOptions{})
	require.NoError(t, err, "helm's storage: Secret sh.helm.release.v1.NAME.v1")
	assert.Equal(t, "helm.sh/release.v1", string(s.Type))
	for k, v := range map[string]string{"owner": "helm", "name": name, "status": "deployed", "version": "1"} {
		assert.Equal(t, v, s.Labels[k], "label %s", k)
	}
	cert := f.secret("demo-app-webhook-certs")
	f.demoteStorageClass(name + "-longhorn")

	n := newNode(t, "node-1")
	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0")...)
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	for _, want := range []string{"webhook.image.tag", "follow #1", "storageClass.defaultStorageClass", "live #4",
		"promote.clusterPodCIDR", "readonly #3", "upgraded " + f.target(name) + " 1.0.0 → 2.0.0"} {
		assert.Contains(t, r.Stdout, want)
	}
	h := f.history(name)
	require.Len(t, h, 2)
	rel := h[1]
	assert.Equal(t, "deployed", rel.Info.Status.String())
	assert.Equal(t, "2.0.0", rel.Chart.Metadata.Version)
	assert.Equal(t, "2.0.0", rel.Labels[plainrelease.LabelVersion])
	assert.Equal(t, "1", rel.Labels[plainrelease.LabelFromRevision])
	webhook, _ := rel.Config["webhook"].(map[string]any)
	assert.NotContains(t, webhook, "image", "the pinned tag was dropped")
	promote, _ := rel.Config["promote"].(map[string]any)
	assert.Equal(t, "10.52.0.0/16", promote["clusterPodCIDR"])
	sc, _ := rel.Config["storageClass"].(map[string]any)
	assert.Equal(t, false, sc["defaultStorageClass"])
	assert.NotContains(t, rel.Config, "kubeVip", "the migration dropped kubeVip.config")
	assert.Equal(t, cert, f.secret("demo-app-webhook-certs"), "once kept the certificate")
	assert.Equal(t, installed.Config["storageClass"].(map[string]any)["replicaCount"], sc["replicaCount"], "a customisation kept")
	d, err := f.env.Kube().AppsV1().Deployments(f.ns).Get(t.Context(), name+"-web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, d.Generation, d.Status.ObservedGeneration)
	assert.Equal(t, int32(1), d.Status.AvailableReplicas, "the Deployment rolled out for real")

	st := f.cli(n, "status", "--target", f.target(name))
	require.Equal(t, 0, st.Code, st.Stderr)
	assert.Contains(t, st.Stdout, f.target(name)+": version 2.0.0, ready (resources ")
	assert.Contains(t, st.Stdout, "helm revision 1 (chart 1.0.0, superseded)")
	for _, format := range []string{"json", "yaml"} {
		st := f.cli(n, "status", "--target", f.target(name), "-o", format)
		require.Equal(t, 0, st.Code, st.Stderr)
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(st.Stdout), &obj), "status -o %s: %s", format, st.Stdout)
		assert.Equal(t, "2.0.0", obj["version"], "status -o %s", format)
		assert.Equal(t, true, obj["ready"], "status -o %s", format)
	}

	before := len(f.writesBy())
	again := f.cli(newNode(t, "node-2"), "upgrade", f.upgradeArgs(name, "2.0.0")...)
	require.Equal(t, 0, again.Code, again.Stderr)
	assert.Contains(t, again.Stdout, "nothing to do")
	assert.Equal(t, before, len(f.writesBy()), "a re-run writes nothing")
	assert.Len(t, f.history(name), 2)

	// rollback --target goes back to the revision recorded before the upgrade
	rb := f.cli(n, "rollback", "--target", f.target(name), "--timeout", "60s")
	require.Equal(t, 0, rb.Code, "stderr: %s", rb.Stderr)
	h = f.history(name)
	require.Len(t, h, 3)
	assert.Equal(t, "1.0.0", h[2].Chart.Metadata.Version)
	assert.Equal(t, installed.Config, h[2].Config, "the values of revision 1")
	assert.Equal(t, "1.0.0", h[2].Labels[plainrelease.LabelVersion], "the rollback is recorded")
}

func (f *fixture) secret(name string) []byte {
	f.t.Helper()
	s, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return s.Data["tls.crt"]
}

// An image that never becomes ready (KWOK holds the new pods not ready):
// the wait names the Deployment, times out, and the release is rolled back
// to the revision the run started from: exit 4 naming both revisions.
func TestTimeoutRollsBack(t *testing.T) {
	f := newFixture(t, "not-ready")
	name := releaseName()
	installed := f.install(name)
	r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0", "--timeout", "10s")...)
	r.RequireCode(t, outcome.ExitTimeout)
	assert.Contains(t, r.Stderr, "Deployment "+f.ns+"/"+name+"-web")
	assert.Contains(t, r.Stderr, "rolled back helm release "+f.ns+"/"+name+" from revision 2 (chart 2.0.0) to revision 1 (chart 1.0.0) as revision 3")
	h := f.history(name)
	require.Len(t, h, 3)
	assert.Equal(t, "deployed", h[2].Info.Status.String())
	assert.Equal(t, "1.0.0", h[2].Chart.Metadata.Version)
	assert.Equal(t, installed.Config, h[2].Config, "the values of revision 1")
}

// A chart Helm cannot render in the release's namespace: preflight's
// conflict check renders it as the release and refuses it (exit 3), and
// nothing changed.
func TestRenderFailureChangesNothing(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	tmpl := `{{ if ne .Release.Namespace "default" }}{{ fail "this chart refuses the namespace" }}{{ end }}`
	require.NoError(t, writeTemplate(f.charts, "2.0.0", "fail.yaml", tmpl))
	before := f.writesBy()
	r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "this chart refuses the namespace")
	assert.Contains(t, r.Stderr, "preflight")
	assert.Len(t, f.history(name), 1)
	assert.Equal(t, before, f.writesBy(), "nothing written")
}

// Five nodes race: one upgrade, one new revision.
func TestRacingNodesUpgradeOnce(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	var wg sync.WaitGroup
	codes := make([]int, 5)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = f.cli(newNode(t, "node-"+string(rune('a'+i))), "upgrade", f.upgradeArgs(name, "2.0.0")...).Code
		}()
	}
	wg.Wait()
	assert.Equal(t, []int{0, 0, 0, 0, 0}, codes)
	assert.Len(t, f.history(name), 2, "one upgrade")
}

// merge --target prints what an upgrade would apply and writes nothing.
func TestMergeTargetOnARelease(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	before := len(f.writesBy())
	r := f.cli(newNode(t, "node-1"), "merge", "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0",
		"--policy", f.policy(name))
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "clusterPodCIDR: 10.52.0.0/16")
	assert.Equal(t, before, len(f.writesBy()))
	assert.Len(t, f.history(name), 1)
}

// Preflight refuses a release whose objects are not ready now, naming
// them, and writes nothing.
func TestPreflightRefusesAReleaseNotReady(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.installWith(name, map[string]any{"hold": "not-ready"}, false)
	before := len(f.writesBy())
	r := f.cli(newNode(t, "node-1"), "preflight", "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0",
		"--policy", f.policy(name))
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "not ready: Deployment "+f.ns+"/"+name+"-web")
	assert.Equal(t, before, len(f.writesBy()))
	assert.Len(t, f.history(name), 1)
}

// A new chart with an object the cluster's admission refuses (a
// webhook, which preflight names and cannot judge): Helm's upgrade
// makes a failed revision, which is rolled back to the revision the run
// started from; exit 1 naming both.
func TestAdmissionRefusalRollsBack(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	installed := f.install(name)
	require.NoError(t, writeTemplate(f.charts, "2.0.0", "refused.yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-refused\n  labels: {"+testenv.RefusedLabel+": {{ .Release.Namespace }}}\ndata: {a: b}\n"))
	testenv.RefuseLabelled(t, f.env, f.ns)
	r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, outcome.ExitFailure)
	assert.Contains(t, r.Stderr, testenv.RefusedMessage)
	assert.Contains(t, r.Stderr, "rolled back helm release "+f.ns+"/"+name+" from revision 2 to revision 1 (chart 1.0.0) as revision 3")
	h := f.history(name)
	require.Len(t, h, 3)
	assert.Equal(t, "failed", h[1].Info.Status.String())
	assert.Equal(t, "deployed", h[2].Info.Status.String())
	assert.Equal(t, "1.0.0", h[2].Chart.Metadata.Version)
	assert.Equal(t, installed.Config, h[2].Config)
}

// release.historyMax in the spec bounds the revisions Helm keeps, as
// helm upgrade --history-max.
func TestHistoryMaxFromTheSpec(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	f.install(name)
	policy, err := os.ReadFile(f.policy(name))
	require.NoError(t, err)
	spec := "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n" +
		"- target: {kind: Release, namespace: " + f.ns + ", name: " + name + "}\n" +
		"  chart: {name: demo-app, source: " + f.charts + "}\n" +
		"  release: {historyMax: 2}\n" + indentPolicy(string(policy))
	path := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o600))
	n := newNode(t, "node-1")
	r := f.cli(n, "upgrade", "--spec", path, "--version", "2.0.0")
	require.Equal(t, 0, r.Code, r.Stderr)
	r = f.cli(n, "upgrade", "--spec", path, "--version", "1.0.0", "--allow-downgrade")
	require.Equal(t, 0, r.Code, r.Stderr)
	var revisions []int
	for _, rel := range f.history(name) {
		revisions = append(revisions, rel.Version)
	}
	assert.Equal(t, []int{2, 3}, revisions, "Helm kept the 2 newest revisions")
}

// indentPolicy turns a policy file into the rules and migrations of a
// spec entry.
func indentPolicy(p string) string {
	var b strings.Builder
	for _, l := range strings.Split(p, "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}
