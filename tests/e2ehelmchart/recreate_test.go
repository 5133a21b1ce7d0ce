package e2ehelmchart

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// Under a HelmChart, through the real helm-controller: a StatefulSet
// whose claim template the new chart grows is refused by preflight
// (klipper-helm's Helm would fail on it), and with apply.recreate listing
// it, the upgrade deletes it before writing the HelmChart and the Job
// creates it again with the new template.
func TestRecreateUnderAHelmChart(t *testing.T) {
	f := newFixture(t)
	name := release()
	require.NoError(t, os.WriteFile(filepath.Join(f.charts, "demo-app-1.0.0", "templates", "db.yaml"), []byte(testchart.StatefulSetTemplate(0, "1Gi")), 0o644))
	f.installExample(name, nil)
	sts := f.env.Kube().AppsV1().StatefulSets(f.ns)
	before, err := sts.Get(t.Context(), name+"-db", metav1.GetOptions{})
	require.NoError(t, err)
	f.charts = f.chartSet(map[string]string{"db.yaml": testchart.StatefulSetTemplate(0, "2Gi")}, nil)
	spec := func(apply string) string {
		return f.writeFile("spec.yaml", `apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: HelmChart, namespace: `+f.ns+`, name: `+name+`}
  chart: {source: `+f.charts+`}
`+apply)
	}
	n := newNode(t, "node-1")

	r := f.cli(n, "preflight", "--spec", spec(""), "--version", "2.0.0")
	r.RequireCode(t, 3)
	assert.Contains(t, r.Stderr, "rejected by the API server: StatefulSet "+f.ns+"/"+name+"-db")
	assert.Contains(t, r.Stderr, "delete the object first")

	r = f.cli(n, "upgrade", "--spec", spec("  apply: {recreate: [StatefulSet/"+name+"-db]}\n"), "--version", "2.0.0", "--timeout", "90s")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "recreate")
	after, err := sts.Get(t.Context(), name+"-db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, before.UID, after.UID, "created again by the Job")
	assert.Equal(t, "2Gi", after.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String())
}
