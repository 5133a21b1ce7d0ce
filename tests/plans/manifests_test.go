package plans

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// dryRun asks the server to validate and admit a create, strictly (an
// unknown or duplicate field is an error, not a warning), and store nothing.
var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}

// Every object of every manifest in plans/ is accepted by the API server
// (with the SUC Plan CRD installed), as `kubectl apply --dry-run=server`
// would: namespaces first, then the namespaces they refer to exist, then
// the rest.
func TestManifestsAcceptedByTheAPIServer(t *testing.T) {
	env := testenv.ForTest(t)
	ctx := t.Context()
	m := mapper(t, env)

	type item struct {
		file string
		obj  *unstructured.Unstructured
	}
	var namespaces, rest []item
	kinds := map[string]int{}
	for _, file := range manifestFiles(t) {
		for _, obj := range objects(t, file, planFile(t, file)) {
			kinds[obj.GetKind()]++
			if obj.GetKind() == "Namespace" {
				namespaces = append(namespaces, item{file, obj})
			} else {
				rest = append(rest, item{file, obj})
			}
		}
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
		"Secret", "Plan", "ConfigMap", "Deployment", "Service"} {
		assert.NotZero(t, kinds[kind], "plans/ has no %s", kind)
	}
	assert.Equal(t, 2, kinds["Plan"], "a pinned and a channel Plan")

	create := func(it item) {
		t.Helper()
		gvk := it.obj.GroupVersionKind()
		mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s: %s", it.file, gvk)
		res := env.Dynamic().Resource(mapping.Resource)
		var got *unstructured.Unstructured
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			require.NotEmpty(t, it.obj.GetNamespace(), "%s: %s %s names no namespace", it.file, it.obj.GetKind(), it.obj.GetName())
			got, err = res.Namespace(it.obj.GetNamespace()).Create(ctx, it.obj, dryRun)
		} else {
			require.Empty(t, it.obj.GetNamespace(), "%s: %s %s is cluster-scoped", it.file, it.obj.GetKind(), it.obj.GetName())
			got, err = res.Create(ctx, it.obj, dryRun)
		}
		require.NoError(t, err, "%s: %s %s/%s", it.file, it.obj.GetKind(), it.obj.GetNamespace(), it.obj.GetName())
		assert.Equal(t, it.obj.GetName(), got.GetName())
		if spec, ok := it.obj.Object["spec"]; ok && it.obj.GetKind() == "Plan" {
			// the CRD's structural schema would prune a field it does not know
			sent, err := json.Marshal(spec)
			require.NoError(t, err)
			kept, err := json.Marshal(got.Object["spec"])
			require.NoError(t, err)
			assert.JSONEq(t, string(sent), string(kept), "%s: the server changed the Plan's spec", it.file)
		}
	}
	for _, it := range namespaces {
		create(it)
	}
	// the namespaces the manifests refer to: SUC's, the target's, the
	// release's, Longhorn's (a live rule's source)
	for _, ns := range []string{"system-upgrade", "fleet-local", "harvester-system", "longhorn-system"} {
		_, err := env.Kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	for _, it := range rest {
		create(it)
	}

	// a dry run stores nothing
	_, err := env.Dynamic().Resource(testenv.PlansGVR).Namespace("system-upgrade").Get(ctx, "chart-upgrader", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Plan was stored: %v", err)
}

// The server refuses a Plan the CRD does not allow, so the test above
// would notice a broken manifest.
func TestDryRunRefusesABrokenPlan(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	plan := objects(t, "30-plan-pinned.yaml", planFile(t, "30-plan-pinned.yaml"))[0]
	plan.SetNamespace(ns)
	require.NoError(t, unstructured.SetNestedField(plan.Object, "ten", "spec", "concurrency"))
	_, err := env.Dynamic().Resource(testenv.PlansGVR).Namespace(ns).Create(t.Context(), plan, dryRun)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)

	plan = objects(t, "30-plan-pinned.yaml", planFile(t, "30-plan-pinned.yaml"))[0]
	plan.SetNamespace(ns)
	require.NoError(t, unstructured.SetNestedField(plan.Object, "x", "spec", "upgrade", "unknownField"))
	_, err = env.Dynamic().Resource(testenv.PlansGVR).Namespace(ns).Create(t.Context(), plan, dryRun)
	require.Error(t, err, "strict field validation refuses an unknown field")
	assert.Contains(t, err.Error(), "unknownField")
}
