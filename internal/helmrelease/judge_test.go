package helmrelease

import (
	"testing"

	"github.com/stretchr/testify/assert"
	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

func TestJudgeStatus(t *testing.T) {
	rev := Revision{Namespace: "apps", Name: "web", Number: 3}
	for status, want := range map[string]upgrade.Readiness{
		"deployed":        {},
		"failed":          {Failed: "helm release apps/web revision 3 is failed"},
		"pending-upgrade": {Waiting: []string{"helm release apps/web revision 3 is pending-upgrade"}},
	} {
		var r upgrade.Readiness
		rev.Status = common.Status(status)
		assert.Equal(t, status == "deployed", JudgeStatus(&r, rev), status)
		assert.Equal(t, want, r, status)
	}
}

func TestJudgeObjects(t *testing.T) {
	rev := Revision{Namespace: "apps", Name: "web", Number: 3, Status: "deployed"}
	var r upgrade.Readiness
	JudgeObjects(&r, rev, nil)
	assert.Equal(t, []string{"the objects of helm release apps/web revision 3 are not judged yet"}, r.Waiting)
	assert.False(t, r.Ready)

	r = upgrade.Readiness{}
	JudgeObjects(&r, rev, &Resources{Revision: 2, Total: 1, Ready: 1})
	assert.False(t, r.Ready, "objects of another revision never count")

	r = upgrade.Readiness{}
	JudgeObjects(&r, rev, &Resources{Revision: 3, Total: 3, Ready: 2, NotReady: []string{"Deployment apps/web: InProgress"},
		Failed: []string{"Job apps/migrate: Failed"}})
	assert.Equal(t, int64(2), r.ReadyCount)
	assert.Equal(t, int64(3), r.DesiredCount)
	assert.Equal(t, "objects failed: Job apps/migrate: Failed", r.Failed)
	assert.Equal(t, []string{"1 of 3 objects of apps/web are not ready"}, r.Waiting)
	assert.False(t, r.Ready)

	r = upgrade.Readiness{}
	JudgeObjects(&r, rev, &Resources{Revision: 3, Total: 2, Ready: 2})
	assert.True(t, r.Ready)
	assert.Equal(t, int64(2), r.ReadyCount)
}

// HookPodsRunning, as a table: a hook Job's pods by their job-name label,
// a hook Pod by its name, only while pending or running; a pod of no hook
// (the chart's own Deployment, a Job that is not a hook) is not one.
func TestHookPodsRunning(t *testing.T) {
	hooks := []*release.Hook{{Kind: "Job", Name: "db-migrate"}, {Kind: "Pod", Name: "smoke"}, {Kind: "ConfigMap", Name: "hook-config"}, nil}
	pod := func(name, job string, phase corev1.PodPhase) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
		if job != "" {
			p.Labels = map[string]string{"job-name": job}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"no pod", nil, nil},
		{"a hook Job's pod running", []corev1.Pod{pod("db-migrate-x1", "db-migrate", corev1.PodRunning)},
			[]string{"Job/db-migrate (pod db-migrate-x1, Running)"}},
		{"a hook Job's pod pending", []corev1.Pod{pod("db-migrate-x2", "db-migrate", corev1.PodPending)},
			[]string{"Job/db-migrate (pod db-migrate-x2, Pending)"}},
		{"a hook Job's pod done", []corev1.Pod{pod("db-migrate-x3", "db-migrate", corev1.PodSucceeded), pod("db-migrate-x4", "db-migrate", corev1.PodFailed)}, nil},
		{"a hook Pod running", []corev1.Pod{pod("smoke", "", corev1.PodRunning)}, []string{"Pod/smoke (pod smoke, Running)"}},
		{"pods of no hook", []corev1.Pod{pod("web-5f7d", "", corev1.PodRunning), pod("backup-1", "backup", corev1.PodRunning), pod("hook-config", "", corev1.PodRunning)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, HookPodsRunning(hooks, tc.pods))
		})
	}
}
