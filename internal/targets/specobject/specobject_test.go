package specobject_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

func store(env *testenv.Env, ns, name string) (mc, hc specobject.BackupStore) {
	vals := func(b *specobject.Backup) (map[string]any, error) {
		v, _ := b.Spec["values"].(map[string]any)
		return v, nil
	}
	mc = specobject.BackupStore{Kube: env.Kube(), Kind: managedchart.Descriptor, Namespace: ns, Name: name, Values: vals}
	hc = specobject.BackupStore{Kube: env.Kube(), Kind: helmchart.Descriptor, Namespace: ns, Name: name, Values: vals}
	return mc, hc
}

// Two kinds' backups of one name in one namespace: each kind writes,
// lists and reads its own only, by version and as the newest.
func TestBackupsAreKeyedByKind(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	mc, hc := store(env, ns, "app")
	ctx := t.Context()

	name, created, err := mc.Save(ctx, specobject.Object{Kind: managedchart.Descriptor, Namespace: ns, Name: "app", Version: "1.0.0",
		Spec: map[string]any{"version": "1.0.0", "values": map[string]any{"who": "mc"}}})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "chart-upgrader-backup-managedchart-app-1.0.0", name)
	name, created, err = hc.Save(ctx, specobject.Object{Kind: helmchart.Descriptor, Namespace: ns, Name: "app", Version: "1.0.0",
		Spec: map[string]any{"version": "1.0.0", "values": map[string]any{"who": "hc"}}})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "chart-upgrader-backup-helmchart-app-1.0.0", name)

	// written once: a second save keeps the first spec
	_, created, err = hc.Save(ctx, specobject.Object{Kind: helmchart.Descriptor, Namespace: ns, Name: "app", Version: "1.0.0",
		Spec: map[string]any{"version": "1.0.0", "values": map[string]any{"who": "changed"}}})
	require.NoError(t, err)
	assert.False(t, created)

	for _, tc := range []struct {
		s    specobject.BackupStore
		who  string
		name string
	}{{mc, "mc", "chart-upgrader-backup-managedchart-app-1.0.0"}, {hc, "hc", "chart-upgrader-backup-helmchart-app-1.0.0"}} {
		names, err := tc.s.Backups(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{tc.name}, names)
		for _, from := range []string{"1.0.0", ""} {
			b, err := tc.s.ReadBackup(ctx, from)
			require.NoError(t, err, "from %q", from)
			assert.Equal(t, tc.name, b.Name)
			assert.Equal(t, "1.0.0", b.Version)
			assert.Equal(t, tc.who, b.Data.(*specobject.Backup).Spec["values"].(map[string]any)["who"])
		}
	}
	_, err = hc.ReadBackup(ctx, "9.9.9")
	assert.ErrorContains(t, err, "reading backup secret "+ns+"/chart-upgrader-backup-helmchart-app-9.9.9")
}

// A ManagedChart backup written under the name it had before kinds were
// part of it (no kind label) is still found for the ManagedChart, by
// version and as the newest, and never for a HelmChart of the same name.
func TestLegacyBackupsBelongToTheLegacyKind(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	mc, hc := store(env, ns, "old")
	ctx := t.Context()
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "chart-upgrader-backup-old-1.0.0", Namespace: ns,
		Labels: map[string]string{specobject.LabelBackupOf: "old", specobject.LabelBackupVersion: "1.0.0"}},
		Data: map[string][]byte{specobject.BackupKeySpec: []byte("version: 1.0.0\nvalues: {who: legacy}\n")}}
	_, err := env.Kube().CoreV1().Secrets(ns).Create(ctx, legacy, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, legacy.Name, managedchart.Descriptor.LegacyBackupName("old", "1.0.0"))
	assert.Empty(t, helmchart.Descriptor.LegacyBackupName("old", "1.0.0"))

	for _, from := range []string{"1.0.0", ""} {
		b, err := mc.ReadBackup(ctx, from)
		require.NoError(t, err, "from %q", from)
		assert.Equal(t, legacy.Name, b.Name)
		_, err = hc.ReadBackup(ctx, from)
		assert.Error(t, err, "a HelmChart never reads it (from %q)", from)
	}
	names, err := mc.Backups(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{legacy.Name}, names)
	names, err = hc.Backups(ctx)
	require.NoError(t, err)
	assert.Empty(t, names)
	_, err = hc.ReadBackup(ctx, "")
	assert.EqualError(t, err, fmt.Sprintf("no backup of helmchart %s/old", ns))
}

// A corrupt backup is named, not restored.
func TestCorruptBackup(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	_, hc := store(env, ns, "bad")
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: helmchart.Descriptor.BackupName("bad", "1.0.0"), Namespace: ns,
		Labels: map[string]string{specobject.LabelBackupOf: "bad", specobject.LabelBackupKind: "helmchart"}},
		Data: map[string][]byte{specobject.BackupKeySpec: []byte("version: [")}}
	_, err := env.Kube().CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = hc.ReadBackup(t.Context(), "1.0.0")
	assert.ErrorContains(t, err, "backup secret "+ns+"/"+s.Name+": spec.yaml is corrupt")
}

// Conflict maps the API server's conflict, wrapped or not, to the core's
// ErrConflict, and leaves other errors as they are.
func TestConflict(t *testing.T) {
	c := apierrors.NewConflict(schema.GroupResource{Resource: "managedcharts"}, "x", fmt.Errorf("changed"))
	assert.ErrorIs(t, specobject.Conflict(c), upgrade.ErrConflict)
	assert.ErrorIs(t, specobject.Conflict(fmt.Errorf("updating: %w", c)), upgrade.ErrConflict)
	other := fmt.Errorf("forbidden")
	assert.Same(t, other, specobject.Conflict(other))
	assert.Nil(t, specobject.Conflict(nil))
}

// The record annotations round-trip, and an apply removes our pause mark.
func TestRecordAnnotations(t *testing.T) {
	r := upgrade.Record{Version: "2.0.0", ValuesHash: "h", AppliedAt: "t", PreviousVersion: "1.0.0"}
	ann := specobject.Annotate(map[string]string{specobject.AnnotationPaused: "true", "keep": "me"}, specobject.RecordAnnotations(r))
	assert.Equal(t, r, specobject.Record(ann))
	assert.NotContains(t, ann, specobject.AnnotationPaused)
	assert.Equal(t, "me", ann["keep"])
}
