//go:build testseams

// Reads against a real kube-apiserver + etcd (tests/testenv) as a user
// with no RBAC at all: scripts/test runs them (-tags testseams).

package liveobjects_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

func object(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(text), &u.Object))
	return u
}

// An object this process may not read is named with the exact rule that
// lets it (a Role's for a namespaced one, a ClusterRole's for a cluster-
// scoped one), without a refused list; what it may read is read, and
// what does not exist is absent, not unread.
func TestAnUnreadableObjectIsNamedWithTheRuleToAdd(t *testing.T) {
	env := testenv.ForTest(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	for _, name := range []string{"a", "b"} {
		_, err := env.Kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	cfg := env.Config()
	cfg.Impersonate.UserName = "nobody"
	cfg.Impersonate.Groups = []string{"system:authenticated"}
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	objs := []*unstructured.Unstructured{
		object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"),
		object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"),
		object(t, "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\nprovisioner: x\n"),
	}
	res, err := liveobjects.Reader{Dynamic: dyn, Mapper: mapper, Access: &liveobjects.SelfAccess{Kube: kube}}.Read(ctx, objs, ns)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ConfigMap " + ns + `/a: this process may not read it: add to a Role in namespace ` + ns + ` the rule {apiGroups: [""], resources: [configmaps], resourceNames: [a], verbs: [get]}`,
		"ConfigMap " + ns + `/b: this process may not read it: add to a Role in namespace ` + ns + ` the rule {apiGroups: [""], resources: [configmaps], resourceNames: [b], verbs: [get]}`,
		`StorageClass fast: this process may not read it: add to a ClusterRole the rule {apiGroups: ["storage.k8s.io"], resources: [storageclasses], resourceNames: [fast], verbs: [get]}`,
	}, res.Unread())

	// as the admin: one list reads both ConfigMaps, the StorageClass is absent
	admin := liveobjects.Reader{Dynamic: env.Dynamic(), Mapper: mapper, Access: &liveobjects.SelfAccess{Kube: env.Kube()}}
	res, err = admin.Read(ctx, objs, ns)
	require.NoError(t, err)
	assert.Empty(t, res.Unread())
	assert.NotNil(t, res.Objects[0].Live)
	assert.NotNil(t, res.Objects[1].Live)
	assert.Nil(t, res.Objects[2].Live)
	assert.Equal(t, 3, res.Requests, "a SelfSubjectAccessReview and a list for the ConfigMaps, a get for the StorageClass")
}

// Secrets are read by name, never listed, however many of the chart's
// share a namespace: a list would read every Secret there (Helm's release
// records, other programs' credentials).
func TestSecretsAreReadByName(t *testing.T) {
	env := testenv.ForTest(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	for _, name := range []string{"a", "b", "someone-elses"} {
		_, err := env.Kube().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	objs := []*unstructured.Unstructured{
		object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n"),
		object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: b}\n"),
	}
	res, err := liveobjects.Reader{Dynamic: env.Dynamic(), Mapper: mapper, Access: &liveobjects.SelfAccess{Kube: env.Kube()}}.Read(ctx, objs, ns)
	require.NoError(t, err)
	assert.Empty(t, res.Unread())
	assert.Equal(t, "a", res.Objects[0].Live.GetName())
	assert.Equal(t, "b", res.Objects[1].Live.GetName())
	assert.Equal(t, 2, res.Requests, "a get each, no access question, no list")
}
