package helmrelease

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// obj decodes one YAML object as the dynamic client does (integers as
// int64).
func obj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(j))
	return u
}

func TestManifestObjectsSplitsSkipsAndSorts(t *testing.T) {
	rel := &release.Release{Name: "web", Namespace: "apps", Version: 2, Manifest: `---
# Source: web/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: zeta
---
# Source: web/templates/empty.yaml
# nothing rendered here
---
# Source: web/templates/notes.yaml
just: values, no kind
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: other
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
`}
	objs, err := manifestObjects(rel)
	require.NoError(t, err)
	var names []string
	for _, m := range objs {
		names = append(names, m.String())
	}
	// comment-only and kind-less documents are left out; the rest sorted
	// by their String form; a namespace given in the manifest is kept and
	// none is invented for the others (Look defaults it by scope).
	assert.Equal(t, []string{"ClusterRole reader", "ConfigMap other/settings", "Service zeta"}, names)
	assert.Equal(t, "rbac.authorization.k8s.io/v1", objs[0].u.GetAPIVersion())
}

func TestManifestObjectsNamesTheReleaseOfABadDocument(t *testing.T) {
	rel := &release.Release{Name: "web", Namespace: "apps", Version: 7,
		Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n"}
	_, err := manifestObjects(rel)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "helm release apps/web revision 7: manifest: document 1: "), err.Error())
}

func TestManifestObjectsOfAnEmptyManifest(t *testing.T) {
	objs, err := manifestObjects(&release.Release{Name: "x", Namespace: "y", Manifest: ""})
	require.NoError(t, err)
	assert.Empty(t, objs)
}

func TestJudgeObjectCountsCurrentAsReady(t *testing.T) {
	res := &Resources{}
	judgeObject(res, obj(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps}
data: {a: b}
`))
	assert.Equal(t, 1, res.Ready)
	assert.Empty(t, res.NotReady)
	assert.Empty(t, res.Failed)
	assert.Empty(t, res.Objects)
}

func TestJudgeObjectReportsAFailedDeployment(t *testing.T) {
	res := &Resources{}
	judgeObject(res, obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps, generation: 2}
spec: {replicas: 2}
status:
  observedGeneration: 2
  replicas: 2
  conditions:
  - type: Progressing
    status: "False"
    reason: ProgressDeadlineExceeded
    message: ReplicaSet "web-1" has timed out progressing.
`))
	// kstatus's message, once in each list and in the structured form
	assert.Equal(t, 0, res.Ready)
	assert.Equal(t, []string{"Deployment apps/web: Progress deadline exceeded"}, res.Failed)
	assert.Equal(t, []string{"Deployment apps/web: Failed: Progress deadline exceeded"}, res.NotReady)
	assert.Equal(t, []ObjectStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web",
		Status: "Failed", Message: "Progress deadline exceeded"}}, res.Objects)
}

func TestJudgeObjectReportsARolloutInProgress(t *testing.T) {
	res := &Resources{}
	judgeObject(res, obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps, generation: 3}
spec: {replicas: 3}
status:
  observedGeneration: 3
  replicas: 3
  updatedReplicas: 3
  readyReplicas: 1
  availableReplicas: 1
`))
	assert.Equal(t, 0, res.Ready)
	assert.Empty(t, res.Failed, "in progress is not a failure")
	assert.Equal(t, []string{"Deployment apps/web: InProgress: Available: 1/3"}, res.NotReady)
	assert.Equal(t, []ObjectStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "apps", Name: "web",
		Status: "InProgress", Message: "Available: 1/3"}}, res.Objects)
}

func TestJudgeObjectOfAnObjectKstatusCannotRead(t *testing.T) {
	res := &Resources{}
	// conditions must be a list: kstatus cannot compute a status
	judgeObject(res, obj(t, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: apps}
status: {conditions: "not a list"}
`))
	assert.Equal(t, 0, res.Ready)
	require.Len(t, res.Objects, 1)
	o := res.Objects[0]
	assert.Equal(t, "Unknown", o.Status)
	assert.Contains(t, o.Message, "slice")
	assert.Equal(t, []string{"Widget apps/w: " + o.Message}, res.NotReady)
	assert.Empty(t, res.Failed, "an unreadable status is not a failure")
}

func TestJudgeObjectAccumulates(t *testing.T) {
	res := &Resources{Revision: 4, Total: 2}
	cm := `
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: apps}
`
	judgeObject(res, obj(t, cm))
	judgeObject(res, obj(t, strings.Replace(cm, "name: a", "name: b", 1)))
	assert.Equal(t, &Resources{Revision: 4, Total: 2, Ready: 2}, res)
}

func TestIsConfigMapDriver(t *testing.T) {
	for name, want := range map[string]bool{
		"configmap": true, "configmaps": true,
		"": false, "secret": false, "secrets": false, "ConfigMap": false, "memory": false, "sql": false,
	} {
		assert.Equal(t, want, IsConfigMapDriver(name), "%q", name)
	}
}
