package applycheck

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

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
