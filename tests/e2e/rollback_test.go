package e2e

import (
	"bytes"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
)

// rollbackCounting runs the rollback of a target in-process as node n with
// the API transport wrapped, and returns its log, the write requests it made
// and its error.
func (f *fixture) rollbackCounting(n node, name string) (string, *writeCounter, error) {
	f.t.Helper()
	var logs bytes.Buffer
	wc := &writeCounter{}
	opts := app.RollbackOptions{Target: f.targetRef(name), Timeout: 60 * time.Second, NodeName: n.Name,
		Local: app.Local{Kubeconfig: f.env.KubeconfigPath(), StateDir: n.StateDir, LockFile: n.LockFile, TerminationLog: n.TermLog,
			Log: slog.New(slog.NewJSONHandler(&logs, nil)), Out: &logs}}
	seams := app.Seams{WrapTransport: func(rt http.RoundTripper) http.RoundTripper { wc.next = rt; return wc }}
	err := app.Rollback(app.WithSeams(f.t.Context(), seams), opts)
	return logs.String(), wc, err
}

func TestRollbackRestoresVersionAndValues(t *testing.T) {
	f := newFixture(t)
	name := release()
	installed := f.install(name, "1.0.0", example.UserValues())
	installedHash, err := values.Hash(values.Normalize(example.UserValues()).(map[string]any))
	require.NoError(t, err)
	require.Equal(t, installedHash, installed.ValuesHash())

	r := f.cli(f.node, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	require.Equal(t, "2.0.0", f.get(name).Version)
	require.NotEqual(t, installedHash, f.get(name).ValuesHash(), "the upgrade changed the values")

	r = f.cli(f.node, "rollback", "--target", f.targetRef(name), "--timeout", "60s")
	require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
	assert.Contains(t, r.Stdout, "rolled back "+f.targetRef(name)+" 2.0.0 → 1.0.0")
	for _, p := range []string{"restore", "apply", "wait", "verify"} {
		assert.Contains(t, r.Stderr, `"msg":"phase done","target":"`+f.targetRef(name)+`","phase":"`+p+`"`)
	}

	mc := f.get(name)
	assert.Equal(t, "1.0.0", mc.Version)
	assert.Equal(t, installedHash, mc.ValuesHash(), "the values installed are back")
	assert.Equal(t, installed.Values, mc.Values)
	assert.False(t, mc.Paused)
	assertAppliedRecord(t, mc, "1.0.0")
	assert.Equal(t, "2.0.0", mc.Annotations[managedchart.AnnotationPreviousVersion])

	// the rollback waited until Fleet deployed 1.0.0 with those values
	cmObj, err := f.env.Kube().CoreV1().ConfigMaps(f.ns).Get(t.Context(), name+"-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", cmObj.Labels["app.kubernetes.io/version"], "the chart's version")
	assert.Equal(t, "registry.example.com/demo/app:v1.0.0", cmObj.Data["image"])
	assert.Equal(t, "registry.example.com/demo/webhook:v0.4.1", cmObj.Data["webhookImage"], "the pinned tag is back")
	assert.Equal(t, "192.168.1.10", cmObj.Data["kubeVipAddress"], "the value the migration removed is back")
	b, err := f.tc.Bundle(t.Context(), f.ns, name)
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", b.HelmVersion)
	assert.Len(t, f.backups(name), 1, "a rollback writes no backup of its own")

	// restored and ready: a second rollback writes nothing
	before := f.get(name)
	logs, wc, err := f.rollbackCounting(f.node, name)
	require.NoError(t, err, logs)
	assert.Zero(t, wc.writes.Load(), "a second rollback wrote: %v", wc.seen)
	assertUnchanged(t, before, f.get(name))
}

func TestRollbackWithoutBackupIsRefused(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	before := f.get(name)
	r := f.cli(f.node, "rollback", "--target", f.targetRef(name), "--timeout", "60s")
	assert.Equal(t, outcome.ExitRefused, r.Code, "stderr: %s", r.Stderr)
	l := lastLineOf(r.Stderr)
	assert.Contains(t, l, "nothing to roll back to")
	assert.Contains(t, l, "no backup of managedchart "+f.ns+"/"+name)
	assertUnchanged(t, before, f.get(name))
	assert.False(t, f.leaseExists(name))

	logs, wc, err := f.rollbackCounting(f.node, name)
	assert.Equal(t, outcome.ExitRefused, outcome.Code(err), "error: %v\n%s", err, logs)
	assert.Zero(t, wc.writes.Load(), "writes: %v", wc.seen)
}
