//go:build testseams

// The tests of this file read releases that Helm's own storage driver wrote
// to a real kube-apiserver + etcd (tests/testenv): scripts/test runs them
// (-tags testseams, with KUBEBUILDER_ASSETS).

package helmrelease_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	helmstatus "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/tests/logbuf"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

// rel is revision version of release name in namespace, deploying manifest.
func rel(namespace, name string, version int, status helmstatus.Status, manifest string) *release.Release {
	return &release.Release{Name: name, Namespace: namespace, Version: version,
		Info:     &release.Info{Status: status, Description: fmt.Sprintf("revision %d", version)},
		Chart:    &chart.Chart{Metadata: &chart.Metadata{Name: "demo-app", Version: fmt.Sprintf("%d.0.0", version), APIVersion: "v2"}},
		Config:   map[string]any{"revision": float64(version)},
		Manifest: manifest}
}

// store writes r as Helm does, through its storage driver d.
func store(t testing.TB, d driver.Driver, r *release.Release) {
	t.Helper()
	require.NoError(t, d.Create(fmt.Sprintf("sh.helm.release.v1.%s.v%d", r.Name, r.Version), r))
}

func configMap(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	_, err := env.Kube().CoreV1().ConfigMaps(ns).Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func TestHistoryAndNewestReadWhatHelmStored(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}
	secrets := driver.NewSecrets(env.Kube().CoreV1().Secrets(ns))
	// stored out of order, next to another release of the namespace
	store(t, secrets, rel(ns, "web", 3, helmstatus.StatusDeployed, ""))
	store(t, secrets, rel(ns, "web", 1, helmstatus.StatusSuperseded, ""))
	store(t, secrets, rel(ns, "web", 2, helmstatus.StatusSuperseded, ""))
	store(t, secrets, rel(ns, "other", 9, helmstatus.StatusDeployed, ""))

	for _, drv := range []string{"", "secret", "secrets"} {
		h, err := c.History(ns, "web", drv)
		require.NoError(t, err, drv)
		var versions []int
		for _, r := range h {
			versions = append(versions, r.Version)
			assert.Equal(t, "web", r.Name)
		}
		assert.Equal(t, []int{1, 2, 3}, versions, "driver %q: oldest first, only this release", drv)
	}
	newest, err := c.Newest(ns, "web", "secret")
	require.NoError(t, err)
	require.NotNil(t, newest)
	assert.Equal(t, 3, newest.Version)
	assert.Equal(t, helmstatus.StatusDeployed, newest.Info.Status)
	assert.Equal(t, "3.0.0", newest.Chart.Metadata.Version)

	// a release that does not exist is no error
	h, err := c.History(ns, "missing", "secret")
	require.NoError(t, err)
	assert.Nil(t, h)
	n, err := c.Newest(ns, "missing", "secret")
	require.NoError(t, err)
	assert.Nil(t, n)

	// the ConfigMap driver reads ConfigMaps: these releases are not there
	h, err = c.History(ns, "web", "configmap")
	require.NoError(t, err)
	assert.Nil(t, h)
}

func TestConfigMapDriverReadsConfigMaps(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}
	cms := driver.NewConfigMaps(env.Kube().CoreV1().ConfigMaps(ns))
	store(t, cms, rel(ns, "web", 1, helmstatus.StatusSuperseded, ""))
	store(t, cms, rel(ns, "web", 2, helmstatus.StatusFailed, ""))

	for _, drv := range []string{"configmap", "configmaps"} {
		n, err := c.Newest(ns, "web", drv)
		require.NoError(t, err)
		require.NotNil(t, n, drv)
		assert.Equal(t, 2, n.Version)
		assert.Equal(t, helmstatus.StatusFailed, n.Info.Status)
	}
	n, err := c.Newest(ns, "web", "secret")
	require.NoError(t, err)
	assert.Nil(t, n, "the Secret driver does not read ConfigMaps")
}

func TestNewestStatusReadsTheLabelsOfTheNewestRecord(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}
	secrets := driver.NewSecrets(env.Kube().CoreV1().Secrets(ns))

	status, revision, err := c.NewestStatus(t.Context(), ns, "web")
	require.NoError(t, err)
	assert.Equal(t, helmstatus.Status(""), status)
	assert.Equal(t, 0, revision)

	store(t, secrets, rel(ns, "web", 10, helmstatus.StatusPendingUpgrade, ""))
	store(t, secrets, rel(ns, "web", 9, helmstatus.StatusDeployed, ""))
	store(t, secrets, rel(ns, "other", 11, helmstatus.StatusFailed, ""))
	// a record whose version label is not a number is not the newest, and
	// no record is decoded (this one would not decode)
	_, err = env.Kube().CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.vx",
			Labels: map[string]string{"owner": "helm", "name": "web", "version": "x", "status": "failed"}},
		Data: map[string][]byte{"release": []byte("not a record")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	status, revision, err = c.NewestStatus(t.Context(), ns, "web")
	require.NoError(t, err)
	assert.Equal(t, helmstatus.StatusPendingUpgrade, status)
	assert.Equal(t, 10, revision)
}

func TestDecodeReadsTheRecordHelmWrote(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	secrets := driver.NewSecrets(env.Kube().CoreV1().Secrets(ns))
	want := rel(ns, "web", 4, helmstatus.StatusDeployed, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	store(t, secrets, want)

	s, err := env.Kube().CoreV1().Secrets(ns).Get(t.Context(), "sh.helm.release.v1.web.v4", metav1.GetOptions{})
	require.NoError(t, err)
	got, err := helmrelease.Decode(string(s.Data["release"]))
	require.NoError(t, err)
	assert.Equal(t, "web", got.Name)
	assert.Equal(t, ns, got.Namespace)
	assert.Equal(t, 4, got.Version)
	assert.Equal(t, want.Manifest, got.Manifest)
	assert.Equal(t, want.Config, got.Config)
	assert.Equal(t, helmstatus.StatusDeployed, got.Info.Status)
	assert.Equal(t, "4.0.0", got.Chart.Metadata.Version)
}

func TestLookJudgesTheLiveObjectsOfARevision(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}
	configMap(t, env, ns, "present")
	// namespaced objects without a namespace are the release's; the
	// Namespace object is cluster-scoped and exists (Active: Current)
	r := rel(ns, "web", 5, helmstatus.StatusDeployed, fmt.Sprintf(`---
apiVersion: v1
kind: ConfigMap
metadata:
  name: present
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: absent
---
apiVersion: v1
kind: Namespace
metadata:
  name: %s
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: gadget
`, ns))
	res, err := c.Look(t.Context(), r)
	require.NoError(t, err)
	assert.Equal(t, 5, res.Revision)
	assert.Equal(t, 4, res.Total)
	assert.Equal(t, 2, res.Ready, "the present ConfigMap and the Namespace")
	assert.Empty(t, res.Failed)
	require.Len(t, res.NotReady, 2)
	assert.Equal(t, "ConfigMap absent: not found", res.NotReady[0])
	assert.Contains(t, res.NotReady[1], "Widget gadget: kind unknown to the API server: ")
	assert.Equal(t, []helmrelease.ObjectStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "absent",
		Status: "NotFound", Message: "not found"}}, res.Objects)

	// the same objects in another namespace are not the release's
	other := env.Namespace(t)
	r.Namespace = other
	res, err = c.Look(t.Context(), r)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Ready, "only the Namespace: ConfigMap present is looked for in %s", other)
	assert.Contains(t, res.NotReady, "ConfigMap present: not found")
}

// waitFor waits until cond holds, looking again on each signal (and every
// 100 ms, as a caller's heartbeat does: the watcher signals changes, not
// the end of every initial list); it fails after a minute.
func waitFor(t *testing.T, signal <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-signal:
		case <-tick.C:
		}
	}
}

func TestWatcherFollowsTheNewestRevisionAndItsObjects(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	var logs logbuf.Buffer
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic(),
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	secrets := driver.NewSecrets(env.Kube().CoreV1().Secrets(ns))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	signal := make(chan struct{}, 1)
	w, err := c.Watch(ctx, ns, "web", "secret", func() {
		select {
		case signal <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	assert.Nil(t, w.Newest(), "no release yet")
	assert.Nil(t, w.Resources(), "no release, nothing to judge")

	// revision 1: its one object exists
	configMap(t, env, ns, "one")
	store(t, secrets, rel(ns, "web", 1, helmstatus.StatusDeployed, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n"))
	waitFor(t, signal, "revision 1 judged", func() bool { r := w.Resources(); return r != nil && r.Revision == 1 })
	require.NotNil(t, w.Newest())
	assert.Equal(t, 1, w.Newest().Version)
	assert.Equal(t, "deployed", w.Newest().Labels["status"], "the storage object's labels are the release's")
	assert.Equal(t, &helmrelease.Resources{Revision: 1, Ready: 1, Total: 1}, w.Resources())

	// another release of the namespace is not watched
	store(t, secrets, rel(ns, "other", 7, helmstatus.StatusDeployed, ""))

	// revision 2 deploys an object that does not exist yet
	store(t, secrets, rel(ns, "web", 2, helmstatus.StatusDeployed, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n"))
	waitFor(t, signal, "revision 2 judged", func() bool { r := w.Resources(); return r != nil && r.Revision == 2 })
	assert.Equal(t, 2, w.Newest().Version)
	assert.Equal(t, &helmrelease.Resources{Revision: 2, Total: 1, NotReady: []string{"ConfigMap two: not found"}}, w.Resources())

	// it appears: the watch of the object sees it
	configMap(t, env, ns, "two")
	waitFor(t, signal, "revision 2 ready", func() bool { r := w.Resources(); return r != nil && r.Ready == 1 })
	assert.Equal(t, &helmrelease.Resources{Revision: 2, Ready: 1, Total: 1}, w.Resources())

	// a record that does not decode is skipped with a warning that does
	// not show its content (a release holds the user's values)
	var junk bytes.Buffer
	zw := gzip.NewWriter(&junk)
	_, _ = zw.Write([]byte(`{"name":"web","config":{"adminPassword":"hunter2-do-not-print"`))
	require.NoError(t, zw.Close())
	_, err = env.Kube().CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v3",
			Labels: map[string]string{"owner": "helm", "name": "web", "version": "3", "status": "deployed"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(junk.Bytes()))},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, signal, "the warning", func() bool {
		return strings.Contains(logs.String(), "cannot decode a helm release record")
	})
	assert.Contains(t, logs.String(), "sh.helm.release.v1.web.v3")
	assert.NotContains(t, logs.String(), "hunter2")
	assert.Equal(t, 2, w.Newest().Version, "the newest readable revision stays")

	// the release goes away
	for _, name := range []string{"sh.helm.release.v1.web.v1", "sh.helm.release.v1.web.v2", "sh.helm.release.v1.web.v3"} {
		require.NoError(t, env.Kube().CoreV1().Secrets(ns).Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
	waitFor(t, signal, "the release gone", func() bool { return w.Newest() == nil })
	assert.Nil(t, w.Resources())
}

func TestWatcherOfTheConfigMapDriver(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}
	// the same release in both storages: the driver decides which is read
	store(t, driver.NewConfigMaps(env.Kube().CoreV1().ConfigMaps(ns)), rel(ns, "web", 4, helmstatus.StatusDeployed, ""))
	store(t, driver.NewSecrets(env.Kube().CoreV1().Secrets(ns)), rel(ns, "web", 9, helmstatus.StatusDeployed, ""))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	signal := make(chan struct{}, 1)
	w, err := c.Watch(ctx, ns, "web", "configmaps", func() {
		select {
		case signal <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	// Watch returns once the storage objects are listed
	require.NotNil(t, w.Newest())
	assert.Equal(t, 4, w.Newest().Version)
	// a manifest of no objects is judged at once: nothing to wait for
	waitFor(t, signal, "revision 4 judged", func() bool { return w.Resources() != nil })
	assert.Equal(t, &helmrelease.Resources{Revision: 4}, w.Resources())
}

// A pending revision is read with its own labels (kept on its Secret, not
// in its record) and its Secret's resourceVersion; MarkFailed changes that
// revision's status and description only, and writes nothing over a record
// that changed since it was read.
func TestMarkFailedWritesOnlyOverWhatItRead(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}
	secrets := driver.NewSecrets(env.Kube().CoreV1().Secrets(ns))
	store(t, secrets, rel(ns, "web", 1, helmstatus.StatusDeployed, "a: 1\n"))
	pending := rel(ns, "web", 2, helmstatus.StatusPendingUpgrade, "a: 2\n")
	pending.Labels = map[string]string{"chart-upgrader.io/revision": "2"}
	store(t, secrets, pending)

	newest, err := c.Newest(ns, "web", "secret")
	require.NoError(t, err)
	require.True(t, helmrelease.IsPending(newest))
	p, err := c.ReadPending(t.Context(), newest)
	require.NoError(t, err)
	require.NotNil(t, p)
	assert.Equal(t, map[string]string{"chart-upgrader.io/revision": "2"}, p.Release.Labels, "its own labels, not the driver's")
	assert.NotEmpty(t, p.ResourceVersion())

	// someone writes the record after it was read: nothing is written
	s, err := env.Kube().CoreV1().Secrets(ns).Get(t.Context(), helmrelease.SecretName("web", 2), metav1.GetOptions{})
	require.NoError(t, err)
	s.Annotations = map[string]string{"touched": "yes"}
	_, err = env.Kube().CoreV1().Secrets(ns).Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	err = c.MarkFailed(t.Context(), p, "marked failed by a test")
	require.ErrorIs(t, err, helmrelease.ErrPendingChanged)
	still, err := c.Newest(ns, "web", "secret")
	require.NoError(t, err)
	assert.Equal(t, helmstatus.StatusPendingUpgrade, still.Info.Status, "nothing written over a changed record")

	// read again: marked failed, the rest of the revision as it was
	p, err = c.ReadPending(t.Context(), still)
	require.NoError(t, err)
	require.NoError(t, c.MarkFailed(t.Context(), p, "marked failed by a test"))
	h, err := c.History(ns, "web", "secret")
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, helmstatus.StatusDeployed, h[0].Info.Status, "the other revision untouched")
	assert.Equal(t, helmstatus.StatusFailed, h[1].Info.Status)
	assert.Equal(t, "marked failed by a test", h[1].Info.Description)
	assert.Equal(t, "a: 2\n", h[1].Manifest)
	assert.Equal(t, map[string]any{"revision": float64(2)}, h[1].Config)
	assert.Equal(t, "2", h[1].Labels["chart-upgrader.io/revision"], "its labels kept")
	s, err = env.Kube().CoreV1().Secrets(ns).Get(t.Context(), helmrelease.SecretName("web", 2), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "failed", s.Labels["status"], "the driver's status label follows")

	// a revision no longer pending reads as nil
	p, err = c.ReadPending(t.Context(), h[1])
	require.NoError(t, err)
	assert.Nil(t, p)
}

// MapRemovedAPIs rewrites only the apiVersion lines of the revision's
// objects the cluster no longer serves, keeps the record as it was in a
// Secret first, writes nothing over a record whose manifest changed since
// it was read, nothing when there is nothing to map, and nothing when an
// object has no replacement.
func TestMapRemovedAPIsWritesOnlyOverWhatItRead(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: env.Dynamic()}
	secrets := driver.NewSecrets(env.Kube().CoreV1().Secrets(ns))
	const old = "---\n# Source: demo/templates/pdb.yaml\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 1\n" +
		"---\n# Source: demo/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"
	store(t, secrets, rel(ns, "web", 1, helmstatus.StatusDeployed, old))
	record := func() *corev1.Secret {
		s, err := env.Kube().CoreV1().Secrets(ns).Get(t.Context(), helmrelease.SecretName("web", 1), metav1.GetOptions{})
		require.NoError(t, err)
		return s
	}
	before := record()

	stale := rel(ns, "web", 1, helmstatus.StatusDeployed, "another manifest")
	_, err := c.MapRemovedAPIs(t.Context(), stale)
	require.ErrorIs(t, err, helmrelease.ErrRecordChanged)
	assert.Equal(t, before.ResourceVersion, record().ResourceVersion, "nothing written over a changed record")

	read, err := c.Newest(ns, "web", "secret")
	require.NoError(t, err)
	mapped, err := c.MapRemovedAPIs(t.Context(), read)
	require.NoError(t, err)
	require.Len(t, mapped, 1)
	assert.Equal(t, "PodDisruptionBudget web: policy/v1beta1 → policy/v1", mapped[0].String())
	now, err := c.Newest(ns, "web", "secret")
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(old, "apiVersion: policy/v1beta1", "apiVersion: policy/v1", 1), now.Manifest)
	assert.Equal(t, read.Config, now.Config)
	assert.Equal(t, helmstatus.StatusDeployed, now.Info.Status)
	assert.Equal(t, before.Labels, record().Labels, "the driver's labels kept")
	backup, err := env.Kube().CoreV1().Secrets(ns).Get(t.Context(), helmrelease.MappedBackupName("web", 1), metav1.GetOptions{})
	require.NoError(t, err)
	kept, err := helmrelease.Decode(string(backup.Data["release"]))
	require.NoError(t, err)
	assert.Equal(t, old, kept.Manifest, "the record as it was")

	after := record()
	mapped, err = c.MapRemovedAPIs(t.Context(), now)
	require.NoError(t, err)
	assert.Empty(t, mapped)
	assert.Equal(t, after.ResourceVersion, record().ResourceVersion, "nothing to map: nothing written")

	store(t, secrets, rel(ns, "other", 1, helmstatus.StatusDeployed, "---\napiVersion: example.com/v1alpha1\nkind: Widget\nmetadata: {name: w}\n"))
	other, err := c.Newest(ns, "other", "secret")
	require.NoError(t, err)
	_, err = c.MapRemovedAPIs(t.Context(), other)
	assert.ErrorContains(t, err, "Widget w is at example.com/v1alpha1, which this cluster does not serve, and no version it serves replaces it")
	_, err = env.Kube().CoreV1().Secrets(ns).Get(t.Context(), helmrelease.MappedBackupName("other", 1), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no backup of a record that is not mapped: %v", err)
}
