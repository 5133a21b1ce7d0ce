package e2ehelmchart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// A ManagedChart and a HelmChart of the same name in one namespace are
// two targets: each is upgraded and rolled back to its own values. The
// backups carry the kind in their names and labels, so a rollback never
// reads the other kind's (the ManagedChart's backup is the newer one when
// the HelmChart is rolled back: without the kind, "the newest backup of
// this name" would be it).
func TestSameNameTwoKinds(t *testing.T) {
	f := newFixture(t)
	name := release()
	_, stop, err := fleetsim.Start(t.Context(), fleetsim.Options{Config: f.env.Config(), Loader: fleetsim.DirLoader(f.charts), Namespace: f.ns})
	require.NoError(t, err)
	t.Cleanup(stop)

	// the HelmChart releases into the fixture's namespace, the ManagedChart
	// (release name-mc) into another one: the example chart's objects have
	// fixed names
	f.installExample(name, nil)
	mcNS := f.env.Namespace(t)
	mcRelease := name + "-mc"
	_, err = example.InstallAndWait(t.Context(), f.env, example.Install{Namespace: f.ns, Name: name, ReleaseName: mcRelease,
		ReleaseNamespace: mcNS, Version: "1.0.0", Values: example.UserValues()}, 90*time.Second)
	require.NoError(t, err)
	n := newNode(t, "node-1")
	mcTarget := "managedchart/" + f.ns + "/" + name

	r := f.cli(n, "upgrade", f.upgradeArgs(name, "2.0.0", f.policy(name))...)
	require.Equal(t, 0, r.Code, "helmchart upgrade: %s", r.Stderr)
	r = f.cli(n, "upgrade", "--target", mcTarget, "--chart-source", f.charts, "--version", "2.0.0",
		"--policy", f.policyIn(mcNS, mcRelease), "--timeout", "90s")
	require.Equal(t, 0, r.Code, "managedchart upgrade: %s", r.Stderr)

	// two backups of the one name, one per kind
	list, err := f.env.Kube().CoreV1().Secrets(f.ns).List(t.Context(), metav1.ListOptions{LabelSelector: specobject.LabelBackupOf + "=" + name})
	require.NoError(t, err)
	byKind := map[string]string{}
	for _, s := range list.Items {
		byKind[s.Labels[specobject.LabelBackupKind]] = s.Name
	}
	assert.Equal(t, map[string]string{"helmchart": helmchart.Descriptor.BackupName(name, "1.0.0"),
		"managedchart": managedchart.Descriptor.BackupName(name, "1.0.0")}, byKind)

	// the HelmChart first: the newest backup of this name is the ManagedChart's
	r = f.cli(n, "rollback", "--target", f.target(name), "--timeout", "90s")
	require.Equal(t, 0, r.Code, "helmchart rollback: %s", r.Stderr)
	h := f.get(name)
	assert.Equal(t, "1.0.0", h.Version)
	got, err := values.Parse([]byte(h.ValuesContent))
	require.NoError(t, err)
	want, err := values.Parse([]byte(installerValues(t)))
	require.NoError(t, err)
	assert.Equal(t, want, got, "the HelmChart has its own values back")
	f.waitDeployed(name, "1.0.0")

	r = f.cli(n, "rollback", "--target", mcTarget, "--timeout", "90s")
	require.Equal(t, 0, r.Code, "managedchart rollback: %s", r.Stderr)
	mc, found, err := (&managedchart.Client{Dynamic: f.env.Dynamic(), Kube: f.env.Kube()}).Get(t.Context(), f.ns, name)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "1.0.0", mc.Version)
	assert.Equal(t, values.Normalize(example.UserValues()), values.Normalize(mc.Values), "the ManagedChart has its own values back")
}

// policyIn is the example policy with its namespaced sources in namespace
// and its StorageClass the release's.
func (f *fixture) policyIn(namespace, release string) string {
	root, err := testenv.RepoRoot()
	require.NoError(f.t, err)
	data, err := os.ReadFile(filepath.Join(root, "package", "examples", "policy.yaml"))
	require.NoError(f.t, err)
	p := strings.ReplaceAll(string(data), "namespace: demo-system", "namespace: "+namespace)
	p = strings.ReplaceAll(p, "name: demo-app-longhorn", "name: "+release+"-longhorn")
	return f.writeFile("policy-"+release+".yaml", p)
}
