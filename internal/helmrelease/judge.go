package helmrelease

import (
	"fmt"
	"strings"

	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Revision names one revision of a release and its status, for the
// judgement every kind whose charts end up as a Helm release shares.
type Revision struct {
	Namespace, Name string
	Number          int
	Status          common.Status
}

// RevisionOf is rel as a Revision.
func RevisionOf(rel *release.Release) Revision {
	rev := Revision{Namespace: rel.Namespace, Name: rel.Name, Number: rel.Version}
	if rel.Info != nil {
		rev.Status = rel.Info.Status
	}
	return rev
}

func (r Revision) String() string {
	return fmt.Sprintf("helm release %s/%s revision %d", r.Namespace, r.Name, r.Number)
}

// JudgeStatus adds to rd what the revision's status says: a failed one is
// a failure (rd.Failed), any other but deployed is waited for. It returns
// whether the revision is deployed.
func JudgeStatus(rd *upgrade.Readiness, rev Revision) bool {
	switch rev.Status {
	case common.StatusDeployed:
		return true
	case common.StatusFailed:
		rd.Failed = rev.String() + " is failed"
	default:
		rd.Wait("%s is %s", rev, rev.Status)
	}
	return false
}

// JudgeObjects adds to rd the readiness of the revision's objects, res
// (judged by Look or a Watcher; nil, or of another revision: not judged
// yet): the counts, the objects not ready, those kstatus calls Failed,
// and rd.Ready when every object is ready and nothing else is awaited.
func JudgeObjects(rd *upgrade.Readiness, rev Revision, res *Resources) {
	if res == nil || res.Revision != rev.Number {
		rd.Wait("the objects of %s are not judged yet", rev)
		return
	}
	rd.ReadyCount, rd.DesiredCount = int64(res.Ready), int64(res.Total)
	rd.NonReady = res.NotReady
	if len(res.Failed) > 0 && rd.Failed == "" {
		rd.Failed = "objects failed: " + strings.Join(res.Failed, "; ")
	}
	if len(res.NotReady) > 0 {
		rd.Wait("%d of %d objects of %s/%s are not ready", len(res.NotReady), res.Total, rev.Namespace, rev.Name)
		return
	}
	rd.Ready = rd.Failed == "" && len(rd.Waiting) == 0
}
