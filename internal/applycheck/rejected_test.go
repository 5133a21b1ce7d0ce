package applycheck

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
)

func decoded(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	return u
}

// Every way the API server words a field an update may not change is an
// immutable refusal (apply.recreate's to take); a value it rejects is
// not; a Secret's refusal names fields, never values.
func TestJudgeStoredTellsImmutableFields(t *testing.T) {
	rb := func(role string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb, namespace: ns, resourceVersion: '3'}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + role + "}\nsubjects: [{kind: ServiceAccount, name: app, namespace: ns}]\n"
	}
	svc := func(ip string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns, resourceVersion: '3'}\nspec: {clusterIP: " + ip + ", clusterIPs: [" + ip + "], ports: [{port: 80}]}\n"
	}
	secret := func(value string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns, resourceVersion: '3'}\nimmutable: true\ndata: {a: " + value + "}\n"
	}
	for _, c := range []struct {
		name, live, stored string
		immutable          bool
	}{
		{"roleRef", rb("view"), rb("edit"), true},
		{"cluster IPs", svc("10.0.0.10"), svc("10.0.0.11"), true},
		{"an immutable Secret", secret("aHVudGVyMg=="), secret("aHVudGVyMw=="), true},
		{"a label", rb("view"), rb("view") + "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			live, stored := decoded(t, c.live), decoded(t, c.stored)
			if !c.immutable {
				stored.SetLabels(map[string]string{"a": "b c"})
			}
			r := judgeStored(nil, liveobjects.Object{Want: stored, Live: live}, stored)
			require.NotNil(t, r)
			assert.True(t, r.Update)
			assert.Equal(t, c.immutable, r.Immutable, r.Why)
			assert.NotContains(t, r.Why, "aHVudGVy", "a Secret's value")
		})
	}
}

// A Secret the schema refuses is refused without the words that may
// quote its value.
func TestASecretTheSchemaRefusesIsNotQuoted(t *testing.T) {
	s := decoded(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\ndata: {a: 12345}\n")
	r := schemaRejected(liveobjects.Object{Want: s}, errors.New(".data.a: expected string, got &value.valueUnstructured{Value:12345}"))
	assert.NotContains(t, r.Why, "12345")
	assert.Contains(t, r.Why, "values <redacted>")
	assert.False(t, r.Update)
	w := decoded(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n")
	assert.Contains(t, schemaRejected(liveobjects.Object{Want: w}, errors.New(".data.a: expected string")).Why, ".data.a: expected string")
}

// The API server's field paths, as steps: names between dots, indices
// and keys (dots in them kept) in brackets.
func TestServerFieldSteps(t *testing.T) {
	for path, want := range map[string][]any{
		"spec.selector":                           {"spec", "selector"},
		"spec.ports[1].name":                      {"spec", "ports", 1, "name"},
		"metadata.labels[app.kubernetes.io/name]": {"metadata", "labels", "app.kubernetes.io/name"},
		"spec.template.spec.containers[0].resources.requests[cpu]": {"spec", "template", "spec", "containers", 0, "resources", "requests", "cpu"},
		"roleRef": {"roleRef"},
	} {
		got, ok := serverFieldSteps(path)
		assert.True(t, ok, path)
		assert.Equal(t, want, got, path)
	}
	for _, bad := range []string{"", "spec.ports[1"} {
		_, ok := serverFieldSteps(bad)
		assert.False(t, ok, bad)
	}
}

// A refused field is read back to the value that renders it, with the way
// to keep its live value: a RoleBinding's roleRef.name from .Values.role.
func TestARefusedFieldNamesItsValue(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	for name, body := range map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: rb\nversion: 1.0.0\n",
		"values.yaml": "role: edit\n",
		"templates/rb.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb, namespace: ns}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {{ .Values.role }}}\nsubjects: [{kind: ServiceAccount, name: app, namespace: ns}]\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	c, err := chart.Load(dir)
	require.NoError(t, err)
	trace, err := chart.Trace(c, nil, "rel", "ns")
	require.NoError(t, err)
	rb := func(role string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb, namespace: ns, resourceVersion: '3'}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + role + "}\nsubjects: [{kind: ServiceAccount, name: app, namespace: ns}]\n"
	}
	live, stored := decoded(t, rb("view")), decoded(t, rb("edit"))
	r := judgeStored(nil, liveobjects.Object{Want: stored, Live: live}, stored)
	require.NotNil(t, r)
	rejected := []*Rejected{r}
	rejectedInValues(rejected, trace)
	assert.Contains(t, rejected[0].Values, ".roleRef.name: set by the value role")
	assert.Contains(t, rejected[0].String(), "--set-string role=view", "the refusal says how to keep the live value: %s", rejected[0])
}
