package serverrules

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	return u
}

const webDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec:
      containers:
      - name: web
        image: nginx
        resources: {requests: {cpu: 100m}}
`

// Each case is a write the API server refuses, named as it names it, and
// the control beside it that it accepts.
func TestTheServersVerdict(t *testing.T) {
	cases := []struct {
		name      string
		live, obj string
		refused   string // "" accepts
	}{
		{name: "a new Deployment", obj: webDeployment},
		{name: "an unchanged Deployment", live: webDeployment, obj: webDeployment},
		{name: "a Deployment's selector gains a label", live: webDeployment,
			obj:     replace(webDeployment, "matchLabels: {app: web}", "matchLabels: {app: web, tier: front}"),
			refused: "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"front\"}}: field is immutable"},
		{name: "a quantity with a space", obj: replace(webDeployment, "cpu: 100m", `cpu: "100 m"`),
			refused: "quantities must match the regular expression"},
		{name: "a Service with two ports named alike", live: `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  clusterIP: 10.0.0.10
  clusterIPs: [10.0.0.10]
  ports: [{name: web, port: 8080, targetPort: 80}]
`, obj: `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  clusterIP: 10.0.0.10
  clusterIPs: [10.0.0.10]
  ports: [{name: web, port: 8080, targetPort: 80}, {name: web, port: 80, targetPort: 80}]
`, refused: `spec.ports[1].name: Duplicate value: "web"`},
		{name: "a StatefulSet's claim template grows", live: statefulSet("1Gi"), obj: statefulSet("2Gi"),
			refused: "spec.volumeClaimTemplates: Invalid value"},
		{name: "a StatefulSet's replicas change", live: statefulSet("1Gi"), obj: replace(statefulSet("1Gi"), "replicas: 1", "replicas: 3")},
		{name: "an immutable ConfigMap's data", live: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: demo}\nimmutable: true\ndata: {a: b}\n",
			obj: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: demo}\nimmutable: true\ndata: {a: c}\n", refused: "field is immutable when `immutable` is set"},
		{name: "a RoleBinding's roleRef", live: roleBinding("view"), obj: roleBinding("edit"), refused: "roleRef: Invalid value"},
		{name: "a RoleBinding's subjects", live: roleBinding("view"), obj: replace(roleBinding("view"), "name: app, namespace: demo}]", "name: other, namespace: demo}]")},
		{name: "a bad label", obj: replace(webDeployment, "name: web, namespace: demo}", "name: web, namespace: demo, labels: {a: 'b c'}}"),
			refused: "metadata.labels: Invalid value: \"b c\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var live *unstructured.Unstructured
			if c.live != "" {
				live = obj(t, c.live)
				live.SetResourceVersion("7") // as every live object has one
			}
			err := Validate(live, obj(t, c.obj))
			if c.refused == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.refused)
		})
	}
}

// A kind it has no rules for (a custom resource) is not judged.
func TestAnUnknownKindIsNotJudged(t *testing.T) {
	w := obj(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: demo}\nspec: {size: '1 0'}\n")
	assert.False(t, Knows(w.GroupVersionKind()))
	assert.NoError(t, Validate(nil, w))
	assert.True(t, Knows(obj(t, webDeployment).GroupVersionKind()))
}

func replace(s, old, new string) string {
	out := strings.Replace(s, old, new, 1)
	if out == s {
		panic("no " + old)
	}
	return out
}

func statefulSet(storage string) string {
	return `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: demo}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: ` + storage + `}}}
`
}

func roleBinding(role string) string {
	return `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app, namespace: demo}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + role + `}
subjects: [{kind: ServiceAccount, name: app, namespace: demo}]
`
}
