package apimap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
)

// served is a cluster of Kubernetes 1.33: the versions it serves of the
// kinds the tests use, the preferred first, as discovery orders them.
func served() meta.RESTMapper {
	kinds := []schema.GroupVersionKind{
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
		{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
		{Group: "autoscaling", Version: "v1", Kind: "HorizontalPodAutoscaler"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "batch", Version: "v1", Kind: "CronJob"},
		{Version: "v1", Kind: "ConfigMap"},
	}
	var preferred []schema.GroupVersion
	for _, gvk := range kinds {
		preferred = append(preferred, gvk.GroupVersion())
	}
	m := meta.NewDefaultRESTMapper(preferred)
	for _, gvk := range kinds {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}

// Each removed version maps to Kubernetes' declared replacement, or the
// served version of the same group and kind; a served one is left as it
// is.
func TestReplacement(t *testing.T) {
	for _, c := range []struct{ from, to schema.GroupVersionKind }{
		{schema.GroupVersionKind{Group: "policy", Version: "v1beta1", Kind: "PodDisruptionBudget"}, schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}},                   // k8s.io/api's lifecycle
		{schema.GroupVersionKind{Group: "extensions", Version: "v1beta1", Kind: "Ingress"}, schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}},                            // another group, the lifecycle's
		{schema.GroupVersionKind{Group: "extensions", Version: "v1beta1", Kind: "Deployment"}, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}},                                   // the same
		{schema.GroupVersionKind{Group: "batch", Version: "v1beta1", Kind: "CronJob"}, schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}},                                             // the same
		{schema.GroupVersionKind{Group: "autoscaling", Version: "v2beta2", Kind: "HorizontalPodAutoscaler"}, schema.GroupVersionKind{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"}}, // no type left in k8s.io/api: the served version
		{schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "Widget"}, schema.GroupVersionKind{}},                                                                                     // nothing replaces it
	} {
		to, ok := Replacement(c.from, served())
		assert.Equal(t, c.to.Kind != "", ok, "%s", c.from)
		assert.Equal(t, c.to, to, "%s", c.from)
	}
}

const stored = `---
# Source: demo/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  note: "apiVersion: policy/v1beta1"
---
# Source: demo/templates/pdb.yaml
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: app
spec:
  minAvailable: 1
---
# Source: demo/templates/hpa.yaml
apiVersion: "autoscaling/v2beta2"
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  maxReplicas: 3
`

// Map rewrites the apiVersion line of each unserved object and nothing
// else (a value that reads like one stays); a manifest of served versions
// is left as it is; an object nothing replaces is an error naming it.
func TestMap(t *testing.T) {
	objs, err := manifest.Objects(stored)
	require.NoError(t, err)
	found := Unserved(objs, served())
	assert.Equal(t, []Mapping{
		{Object: "PodDisruptionBudget app/web", From: "policy/v1beta1", To: "policy/v1"},
		{Object: "HorizontalPodAutoscaler web", From: "autoscaling/v2beta2", To: "autoscaling/v2"},
	}, found)

	out, mapped, err := Map(stored, served())
	require.NoError(t, err)
	assert.Equal(t, found, mapped)
	assert.Contains(t, out, "# Source: demo/templates/pdb.yaml\napiVersion: policy/v1\nkind: PodDisruptionBudget")
	assert.Contains(t, out, "# Source: demo/templates/hpa.yaml\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler")
	assert.Contains(t, out, `note: "apiVersion: policy/v1beta1"`, "a value is not an apiVersion")
	assert.Len(t, out, len(stored)-len("beta1")-len(`"beta2"`), "nothing else changes")

	again, mapped, err := Map(out, served())
	require.NoError(t, err)
	assert.Empty(t, mapped, "a mapped manifest maps to itself")
	assert.Equal(t, out, again)

	_, _, err = Map(stored+"---\napiVersion: example.com/v1alpha1\nkind: Widget\nmetadata: {name: w}\n", served())
	assert.EqualError(t, err, "Widget w is at example.com/v1alpha1, which this cluster does not serve, and no version it serves replaces it")

	_, _, err = Map("---\napiVersion: [\n", served())
	assert.ErrorContains(t, err, "document 1")
}
