package e2ehelmchart

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// refusedObject is a template the cluster's admission refuses
// (testenv.RefuseLabelled), though Helm renders it and preflight, which
// cannot see admission, passes it: the upgrade makes a failed release
// revision.
const refusedObject = `apiVersion: v1
kind: ConfigMap
metadata:
  name: fp-bad
  labels: {` + testenv.RefusedLabel + `: "{{ .Release.Namespace }}"}
data: {a: b}
`

// uids are the UIDs of the release's objects of 1.0.0 that a person would
// miss: the chart's ConfigMap and its certificate Secret.
func (f *fixture) uids(name string) map[string]types.UID {
	f.t.Helper()
	cm := f.configMap(name + "-config")
	s, err := f.env.Kube().CoreV1().Secrets(f.ns).Get(f.t.Context(), "demo-app-webhook-certs", metav1.GetOptions{})
	require.NoError(f.t, err)
	return map[string]types.UID{"configmap": cm.UID, "secret": s.UID}
}

// deletes lists the deletions of the chart's ConfigMaps and Secrets in
// the fixture's namespace that the audit log holds, by anyone (the Job's
// uninstall, chart-upgrader, Helm): every ConfigMap and Secret but
// helm-controller's own (chart-content-, chart-values-) and Helm's
// storage (sh.helm.release.).
func (f *fixture) deletes() []string {
	f.t.Helper()
	events, err := testenv.ReadAuditLog(f.env.AuditLogPath())
	require.NoError(f.t, err)
	var out []string
	for _, e := range events {
		if e.ObjectRef == nil || e.ObjectRef.Namespace != f.ns || (e.Verb != "delete" && e.Verb != "deletecollection") {
			continue
		}
		r, name := e.ObjectRef.Resource, e.ObjectRef.Name
		if r != "configmaps" && r != "secrets" {
			continue
		}
		if strings.HasPrefix(name, "chart-content-") || strings.HasPrefix(name, "chart-values-") || strings.HasPrefix(name, "sh.helm.release.") {
			continue
		}
		out = append(out, e.Verb+" "+r+"/"+name+" by "+e.User.Username)
	}
	return out
}

// An upgrade to a version with one object the API server refuses, on a
// HelmChart created without a failure policy (the CRD defaults it to
// reinstall, helm-controller's default): the upgrade writes abort with the new
// version, the Job's second run aborts instead of uninstalling, and
// chart-upgrader exits 1. Nothing of the chart is deleted (the UIDs are
// the same, the audit log holds no delete), Helm's history is intact.
// Then rollback moves the failed release back to 1.0.0 (it writes retry:
// abort would leave a failed release where it is), the objects still
// the same ones.
func TestFailedUpgradeUninstallsNothingAndRollsBack(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, map[string]any{"backOffLimit": int64(1)})
	before := f.uids(name)
	f.charts = f.chartSet(map[string]string{"fp-bad.yaml": refusedObject}, nil)
	testenv.RefuseLabelled(t, f.env, f.ns)
	n := newNode(t, "node-1")

	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name), "--timeout", "90s")...)
	r.RequireCode(t, outcome.ExitFailure)
	assert.Contains(t, r.Stderr, "job "+f.ns+"/helm-install-"+name)
	assert.Contains(t, r.Stderr, `"phase":"preflight"`)
	assert.Contains(t, r.Stderr, "failure policy reinstall (helmchart "+f.ns+"/"+name+"); the upgrade writes abort on the HelmChart with the new version")

	h := f.get(name)
	assert.Equal(t, helmchart.PolicyAbort, h.FailurePolicy, "written with the new version")
	assert.Equal(t, helmchart.PolicyReinstall, h.Annotations[helmchart.AnnotationFailurePolicyBefore], "what was there before (the CRD's default)")
	job := f.job(name)
	assert.Equal(t, "BackoffLimitExceeded", jobFailedReason(job), "the Job's runs failed and aborted, none reinstalled")
	assert.Equal(t, before, f.uids(name), "no object of the chart was deleted and made again")
	assert.Empty(t, f.deletes(), "no object of the chart deleted")
	_, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(t.Context(), "fp-bad", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the refused object was never made")

	hist, err := (&helmrelease.Client{Kube: f.env.Kube(), Dynamic: f.env.Dynamic()}).History(f.ns, name, "secret")
	require.NoError(t, err)
	require.Len(t, hist, 2, "Helm's history: the install and the failed upgrade")
	assert.Equal(t, "1.0.0", hist[0].Chart.Metadata.Version)
	assert.Equal(t, "deployed", hist[0].Info.Status.String(), "1.0.0 is still what runs")
	assert.Equal(t, "2.0.0", hist[1].Chart.Metadata.Version)
	assert.Equal(t, "failed", hist[1].Info.Status.String())

	rb := f.cli(n, "rollback", "--target", f.target(name), "--timeout", "90s")
	rb.RequireCode(t, 0)
	h = f.get(name)
	assert.Equal(t, "1.0.0", h.Version)
	assert.Equal(t, helmchart.PolicyRetry, h.FailurePolicy, "a restore over a failed release writes retry")
	assert.Equal(t, helmchart.PolicyReinstall, h.Annotations[helmchart.AnnotationFailurePolicyBefore], "still what was there before the first write")
	rel := f.waitDeployed(name, "1.0.0")
	assert.Equal(t, 3, rel.Revision, "upgraded from the failed state: 1, 2 (failed), 3")
	assert.Equal(t, before, f.uids(name), "the old objects kept their UIDs")
	assert.Empty(t, f.deletes())
}

// keep leaves the HelmChart's policy as it is: with reinstall in force,
// preflight passes with a warning of kind target, and writes nothing.
func TestKeepWithReinstallWarns(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	spec := f.writeFile("spec.yaml", `apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: HelmChart, namespace: `+f.ns+`, name: `+name+`}
  chart: {source: `+f.charts+`}
  helmchart: {failurePolicy: keep}
`)
	r := f.cli(newNode(t, "node-1"), "preflight", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	var row string
	for _, line := range strings.Split(r.Stdout, "\n") {
		if fields := strings.Fields(line); len(fields) > 2 && fields[0] == string(values.WarnTarget) {
			row = line
		}
	}
	assert.Contains(t, row, "spec.failurePolicy")
	assert.Contains(t, row, "the failure policy in force is reinstall")
	assert.Contains(t, row, "uninstalls the release")
	assert.Equal(t, helmchart.PolicyReinstall, f.get(name).FailurePolicy, "preflight writes nothing")
}

// A HelmChartConfig that forces reinstall overrides whatever the upgrade
// writes on the HelmChart: preflight refuses (exit 3) naming it, and
// passes with keep. It need not say reinstall: the CRD defaults a
// HelmChartConfig's failurePolicy to it.
func TestHelmChartConfigForcingReinstallIsRefused(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	cfg := f.helmChart(name, map[string]any{"valuesContent": "replicaCount: 2\n"})
	cfg.SetKind("HelmChartConfig")
	created, err := f.env.Dynamic().Resource(helmchart.HelmChartConfigGVR).Namespace(f.ns).Create(t.Context(), cfg, metav1.CreateOptions{})
	require.NoError(t, err)
	policy, _, _ := unstructured.NestedString(created.Object, "spec", "failurePolicy")
	require.Equal(t, helmchart.PolicyReinstall, policy, "the CRD's default")

	r := f.cli(newNode(t, "node-1"), "preflight", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "HelmChartConfig "+f.ns+"/"+name+" sets spec.failurePolicy: reinstall")
	assert.Contains(t, r.Stderr, "helmchart.failurePolicy: keep")

	spec := f.writeFile("spec.yaml", `apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: HelmChart, namespace: `+f.ns+`, name: `+name+`}
  chart: {source: `+f.charts+`}
  helmchart: {failurePolicy: keep}
`)
	r = f.cli(newNode(t, "node-1"), "preflight", "--spec", spec, "--version", "2.0.0")
	require.Equal(t, 0, r.Code, "keep accepts it: %s", r.Stderr)
	assert.Contains(t, r.Stdout, "the failure policy in force is reinstall (HelmChartConfig "+f.ns+"/"+name+")")
}
