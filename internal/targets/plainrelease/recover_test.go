package plainrelease

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// judgePending's decisions, as a table: chart-upgrader's own interrupted
// apply is recovered; a HelmChart's release never is; without
// release.recoverPending.after, or before it, another writer's pending
// revision is refused, saying when it may be recovered; past it, it is
// refused while a hook of it runs and recovered once none does; the hooks
// are read only then, and a failed read is the error.
func TestJudgePending(t *testing.T) {
	since := time.Now().Add(-10 * time.Minute)
	rev := func(version int, status common.Status, labels map[string]string) *release.Release {
		return &release.Release{Name: "web", Namespace: "apps", Version: version, Labels: labels,
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "web", Version: "2.0.0"}},
			Info:  &release.Info{Status: status}}
	}
	base := rev(3, common.StatusDeployed, nil)
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		after   time.Duration
		hooks   []string // the hooks still running; nil: the read must not happen
		hookErr error
		warning values.WarningKind
		says    []string
	}{
		{name: "chart-upgrader's own interrupted apply", labels: map[string]string{LabelRevision: "4", LabelVersion: "2.0.0"},
			warning: WarnInterruptedApply, says: []string{"chart-upgrader's own apply of chart 2.0.0", "from revision 3"}},
		{name: "a HelmChart's release", labels: map[string]string{helmChartLabel: "sha256:abc"}, after: time.Minute,
			says: []string{"written by helm-controller's Job", "never here: this release is a HelmChart's (upgrade it as helmchart/apps/web)"}},
		{name: "no recoverPending.after", labels: map[string]string{"owner": "someone"},
			says: []string{"written by a Helm client other than chart-upgrader (its labels: owner)", "helm rollback web 3 -n apps", "set release.recoverPending.after"}},
		{name: "younger than recoverPending.after", after: time.Hour,
			says: []string{"release.recoverPending.after is 1h0m0s: it may be recovered in "}},
		{name: "a copied record is not ours", labels: map[string]string{LabelRevision: "3", LabelVersion: "1.0.0"},
			says: []string{"it carries chart-upgrader's record of revision 3, copied by Helm"}},
		{name: "older than recoverPending.after, a hook still runs", after: time.Minute, hooks: []string{"Job/web-migrate (pod web-migrate-x, Running)"},
			says: []string{"its hooks still run: Job/web-migrate (pod web-migrate-x, Running)"}},
		{name: "older than recoverPending.after, no hook runs", after: time.Minute, hooks: []string{},
			warning: WarnRecoverPending, says: []string{"older than release.recoverPending.after (1m0s) and no hook of it runs", "from revision 3"}},
		{name: "older than recoverPending.after, the hooks unread", after: time.Minute, hooks: []string{}, hookErr: errors.New("pods is forbidden")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pending := rev(4, common.StatusPendingUpgrade, tc.labels)
			rv := &revisions{base: base, newest: pending, pending: &helmrelease.Pending{Release: pending, Since: since}}
			read := false
			w, problem, err := judgePending("apps", "web", tc.after, rv, since.Add(10*time.Minute), func() ([]string, error) {
				require.NotNil(t, tc.hooks, "the hooks are read only past recoverPending.after")
				read = true
				return tc.hooks, tc.hookErr
			})
			assert.Equal(t, tc.hooks != nil, read, "the hooks are read exactly when needed")
			if tc.hookErr != nil {
				require.ErrorIs(t, err, tc.hookErr)
				return
			}
			require.NoError(t, err)
			text := problem
			if tc.warning != "" {
				assert.Empty(t, problem)
				assert.Equal(t, tc.warning, w.Kind)
				text = w.Message
			} else {
				assert.Empty(t, w.Kind)
				require.NotEmpty(t, problem)
			}
			assert.Contains(t, text, "helm release apps/web revision 4 (chart 2.0.0) is pending-upgrade")
			for _, s := range tc.says {
				assert.Contains(t, text, s)
			}
		})
	}
}
