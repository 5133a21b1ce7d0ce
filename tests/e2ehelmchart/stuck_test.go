package e2ehelmchart

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmstatus "helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// leaveStuck rewrites the newest revision of the HelmChart's release as a
// killed klipper-helm Job leaves it: its record and its Secret's status
// label say status, and no Job runs it.
func (f *fixture) leaveStuck(name string, status helmstatus.Status) int {
	f.t.Helper()
	rc := &helmrelease.Client{Kube: f.env.Kube(), Dynamic: f.env.Dynamic()}
	rel, err := rc.Newest(f.ns, name, "secret")
	require.NoError(f.t, err)
	require.NotNil(f.t, rel)
	secrets := f.env.Kube().CoreV1().Secrets(f.ns)
	s, err := secrets.Get(f.t.Context(), helmrelease.SecretName(name, rel.Version), metav1.GetOptions{})
	require.NoError(f.t, err)
	rel.Info.Status = status
	data, err := helmrelease.Encode(rel)
	require.NoError(f.t, err)
	s.Data["release"] = []byte(data)
	s.Labels["status"] = status.String()
	_, err = secrets.Update(f.t.Context(), s, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	return rel.Version
}

// A HelmChart's release left pending with no Job running (a killed
// klipper-helm): preflight says what klipper-helm's next run does with it,
// under which failure policy. pending-upgrade is set failed and upgraded at
// once whatever the policy: the upgrade goes ahead, and the real
// helm-controller's Job does just that. pending-rollback goes by the
// failure policy: under abort (the spec's default) that run would exit 1
// without upgrading, so it is refused, nothing written.
func TestAReleaseLeftPendingWithNoJob(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.installExample(name, nil)
	stuck := f.leaveStuck(name, helmstatus.StatusPendingRollback)

	before := len(f.writesBy())
	n := newNode(t, "node-1")
	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, "is pending-rollback and no Job of helm-controller runs it: klipper-helm's next run (the Job this upgrade starts) marks it failed, then goes by failure policy abort: it exits 1 without upgrading")
	assert.Equal(t, before, len(f.writesBy()), "a refusal writes nothing")

	f.leaveStuck(name, helmstatus.StatusPendingUpgrade)
	r = f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout+r.Stderr, "is pending-upgrade and no Job of helm-controller runs it: the Job this upgrade starts (klipper-helm) marks it failed and upgrades at once")
	hist, err := (&helmrelease.Client{Kube: f.env.Kube(), Dynamic: f.env.Dynamic()}).History(f.ns, name, "secret")
	require.NoError(t, err)
	require.Len(t, hist, stuck+1)
	// klipper-helm set it failed, then Helm's upgrade from it superseded it
	assert.Equal(t, "superseded", hist[stuck-1].Info.Status.String(), "the stuck revision is pending no more")
	assert.Equal(t, "deployed", hist[stuck].Info.Status.String())
	assert.Equal(t, "2.0.0", hist[stuck].Chart.Metadata.Version)
}
