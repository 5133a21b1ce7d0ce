package drainpredict

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func plan(spec map[string]any, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
		"metadata": map[string]any{"name": "p", "namespace": "system-upgrade"}, "spec": spec}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// A Plan's drain as system-upgrade-controller's Job runs it.
func TestDrainOfPlan(t *testing.T) {
	d, p, ok, err := DrainOfPlan(plan(map[string]any{"drain": map[string]any{}, "concurrency": int64(2)}, map[string]any{"applying": []any{"a", "b"}}))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Drain{IgnoreDaemonSets: true, DeleteEmptyDirData: true, PodSelector: "!upgrade.cattle.io/controller"}, d, "SUC's defaults")
	assert.Equal(t, &Plan{Namespace: "system-upgrade", Name: "p", Deadline: DefaultJobDeadline, DeadlineFromController: true, Concurrency: 2, Applying: []string{"a", "b"}}, p)

	d, p, ok, err = DrainOfPlan(plan(map[string]any{"jobActiveDeadlineSecs": int64(0), "drain": map[string]any{
		"ignoreDaemonSets": false, "deleteLocalData": false, "force": true, "disableEviction": true, "skipWaitForDeleteTimeout": int64(30),
		"timeout": int64(300), "podSelector": map[string]any{"matchLabels": map[string]any{"tier": "web"}}}}, nil))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Drain{Force: true, DisableEviction: true, SkipWaitForDeleteTimeout: 30, Timeout: 300 * time.Nanosecond,
		PodSelector: "!upgrade.cattle.io/controller,tier=web"}, d, "an explicit false drops a default; an integer timeout is nanoseconds")
	assert.Equal(t, int64(300), *p.TimeoutNanos)
	assert.Zero(t, p.Deadline, "0: no deadline")

	d, p, _, err = DrainOfPlan(plan(map[string]any{"jobActiveDeadlineSecs": int64(3600), "drain": map[string]any{"timeout": "5m", "deleteEmptydirData": false}}, nil))
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, d.Timeout)
	assert.False(t, d.DeleteEmptyDirData)
	assert.Equal(t, "5m", p.TimeoutWritten)
	assert.Equal(t, time.Hour, p.Deadline)

	_, _, ok, err = DrainOfPlan(plan(map[string]any{"cordon": true}, nil))
	require.NoError(t, err)
	assert.False(t, ok, "no spec.drain: nothing drained")

	for _, bad := range []map[string]any{
		{"timeout": "soon"},
		{"timeout": true},
		{"ignoreDaemonSets": "yes"},
		{"podSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Bogus"}}}},
	} {
		_, _, _, err := DrainOfPlan(plan(map[string]any{"drain": bad}, nil))
		require.Error(t, err, "%v", bad)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Contains(t, err.Error(), "Plan system-upgrade/p: spec.drain.")
	}
}

// What a dry-run eviction's answer says of the webhooks.
func TestJudgeDryRun(t *testing.T) {
	hooks := []string{"virt-launcher-eviction-interceptor.kubevirt.io", "other.example.com"}
	gr := schema.GroupResource{Resource: "pods"}
	webhook429 := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
		Message: `admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: VMI db is configured with an eviction strategy but is not live-migratable`}}
	webhook400 := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
		Message: `admission webhook "other.example.com" denied the request: no`}}
	budget429 := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)

	assert.Equal(t, dryRunAnswer{}, judgeDryRun(nil, hooks), "allowed")
	assert.Equal(t, dryRunAnswer{}, judgeDryRun(apierrors.NewNotFound(gr, "x"), hooks), "gone")
	assert.Equal(t, dryRunAnswer{}, judgeDryRun(budget429, hooks), "the budget's: the budget rule's")
	a := judgeDryRun(webhook429, hooks)
	require.NotNil(t, a.refusal)
	assert.Contains(t, a.refusal.Why, "admission webhook virt-launcher-eviction-interceptor.kubevirt.io refuses the eviction for now (429; kubectl retries every 5 s")
	a = judgeDryRun(webhook400, hooks)
	require.NotNil(t, a.refusal)
	assert.Contains(t, a.refusal.Why, "admission webhook other.example.com refuses the eviction (400; kubectl gives the pod up at once)")
	a = judgeDryRun(apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "x", errors.New("RBAC")), hooks)
	assert.Nil(t, a.refusal)
	assert.Contains(t, a.notAsked, "may not create pods/eviction")
	a = judgeDryRun(apierrors.NewBadRequest(`admission webhook "other.example.com" does not support dry run`), hooks)
	assert.Nil(t, a.refusal)
	assert.Contains(t, a.notAsked, "does not support dry run")
}

func TestInterceptsEviction(t *testing.T) {
	rule := func(ops []admissionv1.OperationType, groups, resources []string) []admissionv1.RuleWithOperations {
		return []admissionv1.RuleWithOperations{{Operations: ops, Rule: admissionv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: resources}}}
	}
	all, create, update := []admissionv1.OperationType{admissionv1.OperationAll}, []admissionv1.OperationType{admissionv1.Create}, []admissionv1.OperationType{admissionv1.Update}
	assert.True(t, interceptsEviction(rule(all, []string{""}, []string{"pods/eviction"})))
	assert.True(t, interceptsEviction(rule(create, []string{"*"}, []string{"*/*"})))
	assert.True(t, interceptsEviction(rule(create, []string{""}, []string{"pods/*"})))
	assert.False(t, interceptsEviction(rule(create, []string{"*"}, []string{"*"})), "* is top-level resources only")
	assert.False(t, interceptsEviction(rule(update, []string{""}, []string{"pods/eviction"})))
	assert.False(t, interceptsEviction(rule(create, []string{"apps"}, []string{"*/*"})))
}

// The budget's answer as eviction.go words it, and which pods skip it.
func TestBudgetRefusalAndSkips(t *testing.T) {
	b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Status: policyv1.PodDisruptionBudgetStatus{DesiredHealthy: 2, CurrentHealthy: 2}}
	assert.Contains(t, budgetRefusal(b), "it needs 2 healthy pods and has 2")
	b.Status.CurrentHealthy = 3
	b.Status.Conditions = []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason,
		Message: "found no controllers for pod \"x\""}}
	assert.Contains(t, budgetRefusal(b), "its sync failed: found no controllers")

	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	assert.False(t, skipsBudget(pod))
	for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed} {
		assert.True(t, skipsBudget(&corev1.Pod{Status: corev1.PodStatus{Phase: phase}}), phase)
	}
	now := metav1.Now()
	assert.True(t, skipsBudget(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}))
}

// kubectl's aggregated refusal, read back per pod.
func TestRefusalPattern(t *testing.T) {
	m := refusal.FindStringSubmatch("cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): ns/a, ns/b")
	require.NotNil(t, m)
	assert.Equal(t, "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)", m[1])
	assert.Equal(t, "ns/a, ns/b", m[2])
	assert.Equal(t, "--ignore-daemonsets", flagHint.FindStringSubmatch(m[1])[1])
	m = refusal.FindStringSubmatch(`cannot delete error getting daemonset: daemonsets.apps "x" is forbidden: ns/a`)
	require.NotNil(t, m)
	assert.Equal(t, "ns/a", m[2])
}
