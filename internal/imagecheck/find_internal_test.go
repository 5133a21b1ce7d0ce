package imagecheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/registries"
)

const rendered = `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      serviceAccountName: web
      imagePullSecrets: [{name: pull}]
      initContainers: [{name: wait, image: busybox:1.36}]
      containers: [{name: web, image: registry.example.com/web:2.0.0}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: backup, namespace: other}
spec:
  schedule: "@daily"
  jobTemplate: {spec: {template: {spec: {containers: [{name: backup, image: registry.example.com/backup:1}]}}}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {helm.sh/hook: pre-upgrade}
spec:
  template: {spec: {containers: [{name: migrate, image: registry.example.com/migrate:2.0.0}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-pod}
`

func TestFromObjects(t *testing.T) {
	objs, err := manifest.Objects(rendered)
	require.NoError(t, err)
	uses := FromObjects(objs, "demo", hookObjects(objs, "demo"))
	var got []string
	for _, u := range uses {
		got = append(got, u.Where+" → "+u.Image+" as "+u.Namespace+"/"+u.ServiceAccount)
	}
	assert.Equal(t, []string{
		"Deployment demo/web, init container wait → busybox:1.36 as demo/web",
		"Deployment demo/web, container web → registry.example.com/web:2.0.0 as demo/web",
		"CronJob other/backup, container backup → registry.example.com/backup:1 as other/default",
		"Job demo/migrate (a hook), container migrate → registry.example.com/migrate:2.0.0 as demo/default",
	}, got)
	assert.Equal(t, []string{"pull"}, uses[0].PullSecrets)
	reads := PullReads(objs, "demo")
	assert.Len(t, reads, 3, "one per pod's ServiceAccount and secrets: %v", reads)
}

func TestFromValues(t *testing.T) {
	vals := map[string]any{
		"image": map[string]any{"repository": "registry.example.com/web", "tag": "2.0.0"}, // rendered already
		"longhorn": map[string]any{"image": map[string]any{"longhorn": map[string]any{
			"instanceManager": map[string]any{"repository": "longhornio/longhorn-instance-manager", "tag": "v1.7.2"},
			"engine":          map[string]any{"registry": "docker.io", "repository": "longhornio/longhorn-engine", "tag": "v1.7.2"},
		}}},
		"monitoring": map[string]any{"enabled": false, "image": map[string]any{"repository": "prom/prometheus", "tag": "v3"}},
		"kubevirt":   map[string]any{"virtLauncher": "registry.suse.com/suse/sles/15.5/virt-launcher:1.2.2", "tag": 1.27},
		"notAnImage": map[string]any{"repository": "", "tag": "x"},
	}
	uses := []Use{{Where: "Deployment demo/web, container web", Image: "registry.example.com/web:2.0.0"}}
	declared := []Declared{
		{Repository: "longhorn.image.longhorn.instanceManager.repository", Tag: "longhorn.image.longhorn.instanceManager.tag", At: "spec.yaml:9: images.values[1]"},
		{Image: "kubevirt.virtLauncher", At: "spec.yaml:10: images.values[2]"},
	}
	got, err := FromValues(vals, declared, true, uses)
	require.NoError(t, err)
	var refs []string
	for _, u := range got {
		refs = append(refs, u.Where+" → "+u.Image)
		assert.Equal(t, u.Where[:len("values longhorn.image.longhorn.engine")] == "values longhorn.image.longhorn.engine", u.Found, u.Where)
	}
	assert.Equal(t, []string{
		"values longhorn.image.longhorn.instanceManager.repository (spec.yaml:9: images.values[1]) → longhornio/longhorn-instance-manager:v1.7.2",
		"values kubevirt.virtLauncher (spec.yaml:10: images.values[2]) → registry.suse.com/suse/sles/15.5/virt-launcher:1.2.2",
		"values longhorn.image.longhorn.engine → docker.io/longhornio/longhorn-engine:v1.7.2",
	}, refs, "the rendered image, the declared one and the disabled component's are not found again")

	for _, bad := range []struct {
		d    Declared
		want string
	}{
		{Declared{Repository: "nope.repository", At: "spec.yaml:9: images.values[1]"}, "spec.yaml:9: images.values[1].repository: nope.repository is not set in the values"},
		{Declared{Image: "longhorn.image", At: "s:1: images.values[1]"}, "s:1: images.values[1].image: longhorn.image is map[string]interface {}, not an image's string"},
	} {
		_, err := FromValues(vals, []Declared{bad.d}, false, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), bad.want)
	}
}

func node(name, arch string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: arch}}}
}

// A pod's platforms are those of the nodes it may run on (its nodeSelector,
// affinity and tolerations, as the scheduler matches them); an index must
// hold each, an image manifest be one.
func TestJudgePlatforms(t *testing.T) {
	nodes := []corev1.Node{
		node("amd-1", "amd64", map[string]string{"kubernetes.io/arch": "amd64"}),
		node("arm-1", "arm64", map[string]string{"kubernetes.io/arch": "arm64"}),
		node("arm-tainted", "arm64", map[string]string{"kubernetes.io/arch": "arm64", "gpu": "true"}, corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}),
	}
	amdOnly := &corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/arch": "amd64"}}
	anywhere := &corev1.PodSpec{}
	gpu := &corev1.PodSpec{NodeSelector: map[string]string{"gpu": "true"}}
	found := func(index bool, platforms ...string) Pulled {
		a := Answer{Found: true, Index: index, Platforms: platforms}
		return Pulled{Tried: []Answer{a}, Found: &a}
	}
	img, err := registries.ParseImage("registry.example.com/app:1")
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		pod    *corev1.PodSpec
		pulled Pulled
		want   string // "" pullable, else in the refusal
	}{
		{"an amd64 image on the amd64 node its pod selects", amdOnly, found(false, "linux/amd64"), ""},
		{"an amd64 image where arm64 nodes take the pod", anywhere, found(false, "linux/amd64"), "has no linux/arm64 for the nodes its pods may run on (arm-1, at"},
		{"an index with both", anywhere, found(true, "linux/amd64", "linux/arm64/v8"), ""},
		{"an index without the node's", amdOnly, found(true, "linux/arm64"), "its index holds linux/arm64"},
		{"a tainted node the pod does not tolerate is left out", &corev1.PodSpec{}, found(true, "linux/amd64", "linux/arm64"), ""},
		{"a pod that fits no node: every node's platform", gpu, found(false, "linux/amd64"), "no linux/arm64"},
	} {
		out := judge([]*pull{{image: img, uses: []Use{{Where: "Deployment demo/app, container app", Image: img.Written, Pod: c.pod, Namespace: "demo"}}, pulled: c.pulled}}, nodes)
		if c.want == "" {
			assert.Empty(t, out.Refused, c.name)
			assert.Equal(t, "pullable", out.Images[0].Verdict, c.name)
			continue
		}
		require.Len(t, out.Refused, 1, c.name)
		assert.Contains(t, out.Refused[0], c.want, c.name)
	}
	// an image manifest only HEAD asked for (--image-manifests=head): found,
	// its platform not read, so not judged, and the report says so
	headOnly := Answer{Found: true, PlatformNotRead: true}
	out := judge([]*pull{{image: img, uses: []Use{{Where: "Deployment demo/app, container app", Image: img.Written, Pod: anywhere, Namespace: "demo"}},
		pulled: Pulled{Tried: []Answer{headOnly}, Found: &headOnly}}}, nodes)
	assert.Empty(t, out.Refused)
	assert.Equal(t, "pullable; its platform not read (--image-manifests=head)", out.Images[0].Verdict)
	assert.Empty(t, out.Images[0].Platforms)

	// an image of the common shape found in the values: a warning
	out = judge([]*pull{{image: img, uses: []Use{{Where: "values a.image", Image: img.Written, Found: true}},
		pulled: Pulled{Tried: []Answer{{Said: "MANIFEST_UNKNOWN: manifest unknown (HTTP 404)"}}}}}, nodes)
	assert.Empty(t, out.Refused)
	require.Len(t, out.Warnings, 1)
	assert.Contains(t, out.Warnings[0].Message, "no pod template renders it")
}
