package helmrelease

import (
	"testing"

	"github.com/stretchr/testify/assert"
	common "helm.sh/helm/v4/pkg/release/common"

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
