// Package hotfix makes, with the real kubectl, the changes an operator
// makes to a chart's objects in a hurry (testchart.HotfixTemplate's: a
// `kubectl set image`, a `kubectl scale`, a `kubectl patch` of a
// ConfigMap key, and one of a field the template hard-codes), and checks
// what chart-upgrader says and does about them: the drift report in values
// terms, and the fields an upgrade with adopt rules keeps and shares.
package hotfix

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The hotfixes.
const (
	Image     = "registry.example/web:1-hotfix"
	Replicas  = 3
	Retention = "30d"
)

// Fields of HotfixTemplate's objects, as the API server prints them.
const (
	ImageField     = `.spec.template.spec.containers[name="web"].image`
	ReplicasField  = ".spec.replicas"
	RetentionField = ".data.retention"
	HardCodedField = ".spec.revisionHistoryLimit"
)

// The adopt rules that keep the Deployment's hotfixes, and the one that
// keeps the ConfigMap's.
const (
	AdoptDeployment = `- {path: "**.image.tag", policy: adopt}
- {path: web.replicas, policy: adopt}
`
	AdoptConfigMap = "- {path: web.retention, policy: adopt}\n"
)

// Make makes the three hotfixes on release's objects in ns, and, with
// hardCoded, patches the hard-coded revisionHistoryLimit too.
func Make(t *testing.T, env *testenv.Env, ns, release string, hardCoded bool) {
	t.Helper()
	ctx := t.Context()
	dep := "deployment/" + release + "-web"
	for _, args := range [][]string{
		{"set", "image", dep, "web=" + Image},
		{"scale", dep, "--replicas=3"},
		{"patch", "configmap", release + "-web-config", "-p", `{"data":{"retention":"` + Retention + `"}}`},
	} {
		_, err := env.Kubectl(ctx, append([]string{"-n", ns}, args...)...)
		require.NoError(t, err)
	}
	if hardCoded {
		_, err := env.Kubectl(ctx, "-n", ns, "patch", dep, "-p", `{"spec":{"revisionHistoryLimit":2}}`)
		require.NoError(t, err)
	}
}

// UndoHardCoded puts the hard-coded field back to the chart's value.
func UndoHardCoded(t *testing.T, env *testenv.Env, ns, release string) {
	t.Helper()
	_, err := env.Kubectl(t.Context(), "-n", ns, "patch", "deployment/"+release+"-web", "-p", `{"spec":{"revisionHistoryLimit":5}}`)
	require.NoError(t, err)
}

// CheckDrift checks `drift -o json` of release's target: each hotfix is
// named with its manager, the value that renders it and the adopt rule
// and flag that keep it; the hard-coded field (when patched) is not
// adoptable, no value renders it. It returns the report.
func CheckDrift(t *testing.T, stdout, ns, release string, hardCoded bool) *app.DriftOutput {
	t.Helper()
	var out app.DriftOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
	field := func(object, path string) upgrade.DriftField {
		t.Helper()
		for _, f := range out.Fields {
			if f.Object == object && f.Field == path {
				return f
			}
		}
		require.Failf(t, "a drifted field is not reported", "%s %s in %s", object, path, stdout)
		return upgrade.DriftField{}
	}
	dep, cm := "Deployment "+ns+"/"+release+"-web", "ConfigMap "+ns+"/"+release+"-web-config"

	image := field(dep, ImageField)
	assert.True(t, image.Differs)
	assert.Equal(t, Image, image.Live)
	assert.Equal(t, "registry.example/web:1", image.Rendered)
	assert.Contains(t, strings.Join(image.Managers, ","), "kubectl-set")
	assert.Equal(t, "web.image.repository, web.image.tag", image.Reading.Paths())
	assert.Equal(t, []string{"{path: web.image.tag, policy: adopt}"}, image.Reading.Rules, "only the tag changed")
	assert.Equal(t, []string{"--set-string web.image.tag=1-hotfix"}, image.Reading.Set)

	replicas := field(dep, ReplicasField)
	assert.Equal(t, "3", replicas.Live)
	assert.Contains(t, strings.Join(replicas.Managers, ","), "kubectl (Update of scale)")
	assert.Equal(t, []string{"{path: web.replicas, policy: adopt}"}, replicas.Reading.Rules)
	assert.Equal(t, []string{"--set web.replicas=3"}, replicas.Reading.Set)

	retention := field(cm, RetentionField)
	assert.Equal(t, Retention, retention.Live)
	assert.Contains(t, strings.Join(retention.Managers, ","), "kubectl-patch")
	assert.Equal(t, []string{"{path: web.retention, policy: adopt}"}, retention.Reading.Rules)
	assert.Equal(t, []string{"--set-string web.retention=30d"}, retention.Reading.Set)

	if hardCoded {
		limit := field(dep, HardCodedField)
		assert.True(t, limit.Differs)
		assert.False(t, limit.Reading.Adoptable())
		assert.Contains(t, limit.Reading.Reason, "no value renders it")
	}
	return &out
}

// CheckKept checks that release's objects keep the hotfixes after an
// upgrade that adopted them, and that applier (the field manager that
// applied the upgrade, server-side) now owns the image and the replicas
// beside the managers that made them: shared fields, not taken ones.
func CheckKept(t *testing.T, env *testenv.Env, ns, release, applier string) {
	t.Helper()
	ctx := t.Context()
	d, err := env.Kube().AppsV1().Deployments(ns).Get(ctx, release+"-web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, Image, d.Spec.Template.Spec.Containers[0].Image)
	require.NotNil(t, d.Spec.Replicas)
	assert.EqualValues(t, Replicas, *d.Spec.Replicas)
	cm, err := env.Kube().CoreV1().ConfigMaps(ns).Get(ctx, release+"-web-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, Retention, cm.Data["retention"])

	image := fieldpath.MakePathOrDie("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web"), "image")
	replicas := fieldpath.MakePathOrDie("spec", "replicas")
	owners := func(p fieldpath.Path) []string {
		var out []string
		for _, e := range d.ManagedFields {
			s := &fieldpath.Set{}
			if e.FieldsV1 == nil || s.FromJSON(strings.NewReader(string(e.FieldsV1.Raw))) != nil {
				continue
			}
			if s.Has(p) {
				out = append(out, e.Manager+"/"+string(e.Operation))
			}
		}
		return out
	}
	assert.ElementsMatch(t, []string{applier + "/Apply", "kubectl-set/Update"}, owners(image), "the image is shared")
	assert.ElementsMatch(t, []string{applier + "/Apply", "kubectl/Update"}, owners(replicas), "the replicas are shared")
}

// Charts puts testchart.HotfixTemplate (as templates/web.yaml) and its
// values in both versions of the example chart under charts
// (demo-app-1.0.0, demo-app-2.0.0): 2.0.0 moves the image tag from 1 to 2.
func Charts(t *testing.T, charts string) {
	t.Helper()
	for v, tag := range map[string]string{"1.0.0": "1", "2.0.0": "2"} {
		dir := filepath.Join(charts, "demo-app-"+v)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "web.yaml"), []byte(testchart.HotfixTemplate), 0o644))
		data, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
		require.NoError(t, err)
		extra, err := yaml.Marshal(testchart.HotfixValues(tag))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "values.yaml"), append(append(data, '\n'), extra...), 0o644))
	}
}

// WithRules is the policy file at path with rules put first (the first
// matching rule decides), written to a new file whose path it returns.
func WithRules(t *testing.T, path, rules string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(out, []byte(strings.Replace(string(data), "rules:\n", "rules:\n"+rules, 1)), 0o600))
	return out
}
