//go:build testseams

// The client against a real kube-apiserver + etcd (tests/testenv), which
// enforces the stored-version rule itself: scripts/test runs them (-tags
// testseams).

package crds_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

// group is a group of this process's own: CRDs are cluster-wide.
func group(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:8]) + ".example.com"
}

// gadgetGroup is a new group for a test's Gadget CRD on env, whose CRD
// (cluster-scoped, shared by every test of the API server) is deleted
// when the test ends.
func gadgetGroup(t *testing.T, env *testenv.Env, prefix string) string {
	g := group(prefix)
	t.Cleanup(func() { _, _ = env.Kubectl(context.Background(), "delete", "crd", "gadgets."+g, "--ignore-not-found") })
	return g
}

func parsed(t testing.TB, docs ...string) []crds.CRD {
	t.Helper()
	var files []upgrade.CRDFile
	for i, d := range docs {
		files = append(files, upgrade.CRDFile{Path: fmt.Sprintf("demo/crds/%d.yaml", i), Data: []byte(d)})
	}
	cs, err := crds.Parse(files)
	require.NoError(t, err)
	return cs
}

func client(env *testenv.Env) *crds.Client {
	return &crds.Client{Dynamic: env.Dynamic(), Kube: env.Kube(), Installers: []string{"helm"}}
}

// install checks and applies cs, which must all be created.
func install(t testing.TB, c *crds.Client, cs []crds.CRD) {
	t.Helper()
	ds, err := c.Check(t.Context(), crds.CreateReplace, cs)
	require.NoError(t, err)
	for _, d := range ds {
		require.Equal(t, crds.ActionCreate, d.Action, "%+v", d)
	}
	_, err = c.Apply(t.Context(), cs, ds)
	require.NoError(t, err)
}

// Created, then replaced with a new storage version; a version that
// stops being served while objects may be stored at it is refused with
// the objects counted; dropping a stored version is refused by our words
// before the API server's; nothing refused is written.
func TestCheckAndApply(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	g := gadgetGroup(t, env, "client")
	c := client(env)

	v1 := parsed(t, testchart.GadgetCRD(g, false, "v1*"))
	ds, err := c.Check(t.Context(), crds.CreateReplace, v1)
	require.NoError(t, err)
	require.Equal(t, crds.ActionCreate, ds[0].Action, "%+v", ds[0])
	done, err := c.Apply(t.Context(), v1, ds)
	require.NoError(t, err)
	require.Len(t, done, 1)
	gvr := schema.GroupVersionResource{Group: g, Version: "v1", Resource: "gadgets"}
	for i := range 4 {
		_, err := env.Dynamic().Resource(gvr).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": g + "/v1", "kind": "Gadget", "metadata": map[string]any{"name": fmt.Sprintf("g%d", i)}, "spec": map[string]any{"a": "x"}}},
			metav1.CreateOptions{})
		require.NoError(t, err, "the CRD is Established when Apply returns")
	}
	ds, err = c.Check(t.Context(), crds.CreateReplace, v1)
	require.NoError(t, err)
	assert.Equal(t, crds.ActionUnchanged, ds[0].Action)

	// v1 kept but no longer served, v2 the storage version: 4 objects may be stored at v1
	unserved := parsed(t, strings.Replace(testchart.GadgetCRD(g, true, "v1", "v2*"), "served: true", "served: false", 1))
	ds, err = c.Check(t.Context(), crds.CreateReplace, unserved)
	require.NoError(t, err)
	require.Equal(t, crds.ActionRefused, ds[0].Action)
	assert.Contains(t, ds[0].Refused[0], "version v1 would no longer be served while 4 ("+ns+"/g0, "+ns+"/g1, "+ns+"/g2, …) objects exist")
	_, err = c.Apply(t.Context(), unserved, ds)
	require.Error(t, err, "a refused verdict applies nothing")

	// v2 only: the API server would refuse it, and we say why first
	dropped := parsed(t, testchart.GadgetCRD(g, true, "v2*"))
	ds, err = c.Check(t.Context(), crds.CreateReplace, dropped)
	require.NoError(t, err)
	require.Equal(t, crds.ActionRefused, ds[0].Action)
	require.Len(t, ds[0].Refused, 1)
	assert.Contains(t, ds[0].Refused[0], "status.storedVersions holds v1, which the new CRD drops")

	both := parsed(t, testchart.GadgetCRD(g, true, "v1", "v2*"))
	ds, err = c.Check(t.Context(), crds.CreateReplace, both)
	require.NoError(t, err)
	require.Equal(t, crds.ActionReplace, ds[0].Action, "%+v", ds[0])
	_, err = c.Apply(t.Context(), both, ds)
	require.NoError(t, err)
	ds, err = c.Check(t.Context(), crds.Create, both)
	require.NoError(t, err)
	assert.Equal(t, crds.ActionKept, ds[0].Action, "create leaves an existing CRD")
}

// BenchmarkCRDs50 checks and applies 50 CRDs (about KubeVirt's, Longhorn's
// and Harvester's own together), each with two versions: created, then
// replaced with a third version added. Not a test: figures for
// docs/performance.md.
func BenchmarkCRDs50(b *testing.B) {
	env := testenv.ForTest(b)
	c := client(env)
	set := func(g string, versions ...string) []crds.CRD {
		var docs []string
		for i := range 50 {
			docs = append(docs, strings.NewReplacer("gadget", fmt.Sprintf("gadget%d", i), "Gadget", fmt.Sprintf("Gadget%d", i)).Replace(testchart.GadgetCRD(g, true, versions...)))
		}
		return parsed(b, docs...)
	}
	run := func(b *testing.B, p crds.Policy, cs []crds.CRD, want crds.Action) {
		ds, err := c.Check(b.Context(), p, cs)
		require.NoError(b, err)
		for _, d := range ds {
			require.Equal(b, want, d.Action, "%+v", d)
		}
		_, err = c.Apply(b.Context(), cs, ds)
		require.NoError(b, err)
	}
	b.Run("create", func(b *testing.B) {
		for b.Loop() {
			run(b, crds.CreateReplace, set(group("bench"), "v1", "v2*"), crds.ActionCreate)
		}
	})
	b.Run("replace", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			g := group("bench")
			run(b, crds.CreateReplace, set(g, "v1", "v2*"), crds.ActionCreate)
			next := set(g, "v1", "v2", "v3*")
			b.StartTimer()
			run(b, crds.CreateReplace, next, crds.ActionReplace)
		}
	})
}

// createGadgets creates n Gadgets g0… at v1 in ns, spec.a "a-<i>".
func createGadgets(t testing.TB, env *testenv.Env, g, ns string, n int) {
	t.Helper()
	ri := env.Dynamic().Resource(schema.GroupVersionResource{Group: g, Version: "v1", Resource: "gadgets"}).Namespace(ns)
	for i := range n {
		_, err := ri.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{"apiVersion": g + "/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": fmt.Sprintf("g%d", i)}, "spec": map[string]any{"a": fmt.Sprintf("a-%d", i)}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// gadgets reads every Gadget of ns at version: name → spec.a.
func gadgets(t testing.TB, env *testenv.Env, g, version, ns string) map[string]string {
	t.Helper()
	list, err := env.Dynamic().Resource(schema.GroupVersionResource{Group: g, Version: version, Resource: "gadgets"}).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, item := range list.Items {
		out[item.GetName()], _, _ = unstructured.NestedString(item.Object, "spec", "a")
	}
	return out
}

// A CRD whose new version drops v1, with objects stored at v1: with
// migrate, killed after 120 of 300 objects were written back, then run
// again, it converges: the CRD serves v2 alone, status.storedVersions is
// [v2], and every object is there with its content.
func TestMigrationConvergesAfterAKill(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	g := gadgetGroup(t, env, "migrate")
	c := client(env)
	install(t, c, parsed(t, testchart.GadgetCRD(g, true, "v1*")))
	createGadgets(t, env, g, ns, 300)
	before := gadgets(t, env, g, "v1", ns)
	require.Len(t, before, 300)

	v2 := parsed(t, testchart.GadgetCRD(g, true, "v2*"))
	ds, err := c.Check(t.Context(), crds.CreateReplace, v2)
	require.NoError(t, err)
	require.Equal(t, crds.ActionRefused, ds[0].Action, "without migrate: refused")

	c.Migrate = true
	ds, err = c.Check(t.Context(), crds.CreateReplace, v2)
	require.NoError(t, err)
	require.Equal(t, crds.ActionMigrate, ds[0].Action, "%+v", ds[0])
	assert.Equal(t, []string{"v1"}, ds[0].Migrate)
	killed, kill := context.WithCancel(t.Context())
	c.Progress = func(_ string, done int) {
		if done == 120 {
			kill()
		}
	}
	_, err = c.Apply(killed, v2, ds)
	require.Error(t, err, "killed in the middle")
	crd, err := env.Dynamic().Resource(crds.GVR).Get(t.Context(), "gadgets."+g, metav1.GetOptions{})
	require.NoError(t, err)
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	assert.ElementsMatch(t, []string{"v1", "v2"}, stored, "the kill left objects at v1")

	c.Progress = nil
	ds, err = c.Check(t.Context(), crds.CreateReplace, v2)
	require.NoError(t, err)
	require.Equal(t, crds.ActionMigrate, ds[0].Action, "%+v", ds[0])
	_, err = c.Apply(t.Context(), v2, ds)
	require.NoError(t, err)
	crd, err = env.Dynamic().Resource(crds.GVR).Get(t.Context(), "gadgets."+g, metav1.GetOptions{})
	require.NoError(t, err)
	stored, _, _ = unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	assert.Equal(t, []string{"v2"}, stored)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	assert.Len(t, versions, 1, "v1 is gone from the CRD")
	assert.Equal(t, before, gadgets(t, env, g, "v2", ns), "no object lost, none changed")

	ds, err = c.Check(t.Context(), crds.CreateReplace, v2)
	require.NoError(t, err)
	assert.Equal(t, crds.ActionUnchanged, ds[0].Action, "a third run has nothing to do")
}

// BenchmarkMigrate1000 migrates 1,000 objects off a dropped version (the
// intermediate CRD, the writes back, the trim, the final CRD). Not a
// test: figures for docs/performance.md.
func BenchmarkMigrate1000(b *testing.B) {
	env := testenv.ForTest(b)
	c := client(env)
	c.Migrate = true
	for b.Loop() {
		b.StopTimer()
		ns := env.Namespace(b)
		g := group("migbench")
		install(b, c, parsed(b, testchart.GadgetCRD(g, true, "v1*")))
		createGadgets(b, env, g, ns, 1000)
		v2 := parsed(b, testchart.GadgetCRD(g, true, "v2*"))
		b.StartTimer()
		ds, err := c.Check(b.Context(), crds.CreateReplace, v2)
		require.NoError(b, err)
		require.Equal(b, crds.ActionMigrate, ds[0].Action)
		_, err = c.Apply(b.Context(), v2, ds)
		require.NoError(b, err)
	}
}

// A new schema that no longer declares a field objects hold is a
// warning naming the objects and the field, not a refusal.
func TestPruneWarning(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	g := gadgetGroup(t, env, "prune")
	c := client(env)
	install(t, c, parsed(t, testchart.GadgetCRD(g, true, "v1*")))
	ri := env.Dynamic().Resource(schema.GroupVersionResource{Group: g, Version: "v1", Resource: "gadgets"}).Namespace(ns)
	for i, spec := range []map[string]any{{"a": "x", "b": "y"}, {"a": "x"}, {"a": "x", "b": "z"}} {
		_, err := ri.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{"apiVersion": g + "/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": fmt.Sprintf("p%d", i)}, "spec": spec}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	withoutB := parsed(t, testchart.GadgetCRD(g, false, "v1*"))
	ds, err := c.Check(t.Context(), crds.CreateReplace, withoutB)
	require.NoError(t, err)
	require.Equal(t, crds.ActionReplace, ds[0].Action, "%+v", ds[0])
	require.Len(t, ds[0].Warnings, 1)
	assert.Contains(t, ds[0].Warnings[0], "its new schema at v1 does not declare fields 2 objects hold")
	assert.Contains(t, ds[0].Warnings[0], "Gadget "+ns+"/p0: .spec.b; Gadget "+ns+"/p2: .spec.b")
}
