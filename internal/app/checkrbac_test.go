package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/suc"
)

// A kind whose CRD is in a subchart's crds/ folder (Harvester's
// VolumeSnapshotClass, from csi-snapshotter) is granted with the scope its
// CRD says: a cluster-scoped kind in the ClusterRole, never in a Role.
func TestCheckRBACScopesAKindByASubchartsCRD(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "parent")
	for path, text := range map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n- name: snap\n  version: 0.1.0\n",
		"templates/class.yaml": "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata: {name: longhorn-snapshot}\ndriver: driver.longhorn.io\ndeletionPolicy: Delete\n" +
			"---\napiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {name: first}\nspec: {}\n",
		"charts/snap/Chart.yaml": "apiVersion: v2\nname: snap\nversion: 0.1.0\n",
		"charts/snap/crds/classes.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: volumesnapshotclasses.snapshot.storage.k8s.io}\n" +
			"spec:\n  group: snapshot.storage.k8s.io\n  names: {kind: VolumeSnapshotClass, plural: volumesnapshotclasses}\n  scope: Cluster\n  versions: []\n" +
			"---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: volumesnapshots.snapshot.storage.k8s.io}\n" +
			"spec:\n  group: snapshot.storage.k8s.io\n  names: {kind: VolumeSnapshot, plural: volumesnapshots}\n  scope: Namespaced\n  versions: []\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, path), []byte(text), 0o644))
	}
	out, err := CheckRBAC(t.Context(), CheckRBACInput{Chart: dir, Release: "storage/parent"}, suc.CheckRBACOptions{Name: "plan-conflict-check", Namespace: "system-upgrade", ServiceAccount: "plan"})
	require.NoError(t, err)
	kinds := map[string][]string{} // Role or ClusterRole → resources
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct {
			Kind  string
			Rules []struct{ Resources []string }
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj), doc)
		for _, r := range obj.Rules {
			kinds[obj.Kind] = append(kinds[obj.Kind], r.Resources...)
		}
	}
	assert.Contains(t, kinds["ClusterRole"], "volumesnapshotclasses", "%s", out)
	assert.NotContains(t, kinds["Role"], "volumesnapshotclasses", "%s", out)
	assert.Contains(t, kinds["Role"], "volumesnapshots", "%s", out)
}
