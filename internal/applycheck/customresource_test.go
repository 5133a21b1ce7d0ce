//go:build testseams

package applycheck_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// gaugeCRD is a CRD whose schema holds every kind of rule the API server
// validates a custom resource by: an enum, bounds, a pattern, a required
// field, a CEL rule over two fields, and CEL transition rules (oldSelf).
const gaugeCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gauges.rules.example.com}
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: gauges, singular: gauge, kind: Gauge, listKind: GaugeList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [mode]
            x-kubernetes-validations:
            - {rule: "self.min <= self.max", message: "min must not exceed max"}
            properties:
              mode: {type: string, enum: [fast, safe]}
              size: {type: integer, minimum: 1, maximum: 10}
              label: {type: string, pattern: "^[a-z]+$"}
              min: {type: integer}
              max: {type: integer}
              zone:
                type: string
                x-kubernetes-validations: [{rule: "self == oldSelf", message: "zone is immutable"}]
              replicas:
                type: integer
                x-kubernetes-validations: [{rule: "self >= oldSelf", message: "replicas may only grow"}]
`

// gauge is a Gauge named name whose spec is spec (YAML flow).
func gauge(name, spec string) string {
	return "apiVersion: rules.example.com/v1\nkind: Gauge\nmetadata: {name: " + name + "}\nspec: " + spec + "\n"
}

// The check of a custom resource agrees with the API server: for each
// update of a live Gauge, and each Gauge created, preflight refuses where
// the server's dry run refuses, in the server's words, and passes where it
// stores: the CRD's enum, bounds, pattern, required fields and CEL rules,
// transition rules included, read from the schema the cluster publishes.
func TestCustomResourcesAreValidatedAsTheServerValidatesThem(t *testing.T) {
	env := testenv.ForTest(t)
	ctx := t.Context()
	crd := decode(t, gaugeCRD)
	crds := env.Dynamic().Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	_, err := crds.Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: "test", Force: true})
	require.NoError(t, err)
	waitServed(t, env, schema.GroupVersion{Group: "rules.example.com", Version: "v1"})

	const live = "{mode: fast, size: 3, label: abc, min: 1, max: 5, zone: east, replicas: 2}"
	for _, c := range []struct {
		name   string
		create bool   // the chart adds the Gauge; else it updates the live one
		spec   string // the chart's
		says   string // the server's words; "" where it stores the Gauge
	}{
		{name: "a change every rule allows", spec: "{mode: safe, size: 4, label: abcd, min: 2, max: 5, zone: east, replicas: 3}"},
		{name: "a value the enum does not hold", spec: "{mode: slow, size: 3, label: abc, min: 1, max: 5, zone: east, replicas: 2}",
			says: `spec.mode: Unsupported value: "slow"`},
		{name: "a value above the maximum", spec: "{mode: fast, size: 11, label: abc, min: 1, max: 5, zone: east, replicas: 2}",
			says: "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"},
		{name: "a value the pattern refuses", spec: "{mode: fast, size: 3, label: ABC, min: 1, max: 5, zone: east, replicas: 2}",
			says: `spec.label: Invalid value: "ABC"`},
		{name: "a required field dropped", spec: "{size: 3, label: abc, min: 1, max: 5, zone: east, replicas: 2}",
			says: "spec.mode: Required value"},
		{name: "a rule over two fields", spec: "{mode: fast, size: 3, label: abc, min: 6, max: 5, zone: east, replicas: 2}",
			says: "min must not exceed max"},
		{name: "a transition rule: an immutable field changed", spec: "{mode: fast, size: 3, label: abc, min: 1, max: 5, zone: west, replicas: 2}",
			says: "zone is immutable"},
		{name: "a transition rule: a count that may only grow shrinks", spec: "{mode: fast, size: 3, label: abc, min: 1, max: 5, zone: east, replicas: 1}",
			says: "replicas may only grow"},
		{name: "a transition rule: the count grows", spec: "{mode: fast, size: 3, label: abc, min: 1, max: 5, zone: east, replicas: 9}"},
		{name: "a Gauge created with every rule kept", create: true, spec: "{mode: fast, zone: north, replicas: 1, min: 0, max: 0}"},
		{name: "a Gauge created against the enum", create: true, spec: "{mode: quick, min: 0, max: 0}", says: `spec.mode: Unsupported value: "quick"`},
		{name: "a Gauge created against a rule", create: true, spec: "{mode: fast, min: 3, max: 2}", says: "min must not exceed max"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := env.Namespace(t)
			mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
			base := decode(t, gauge("g", live))
			client := resource(t, env.Dynamic(), mapper, base, ns)
			if !c.create {
				_, err := client.Apply(ctx, "g", base, metav1.ApplyOptions{FieldManager: "helm", Force: true})
				require.NoError(t, err)
			}
			want := decode(t, gauge("g", c.spec))
			want.SetNamespace(ns)

			// the oracle: the API server's own dry run of the same apply
			_, oracle := client.Apply(ctx, "g", want, metav1.ApplyOptions{FieldManager: "helm", Force: true, DryRun: []string{metav1.DryRunAll}})
			res, err := applycheck.New(env.Kube(), env.Dynamic(), mapper, nil).Check(ctx,
				applycheck.Request{Manifest: manifestOf(t, want), Namespace: ns, Manager: "helm"})
			require.NoError(t, err)
			require.Empty(t, res.NotChecked)
			refused, _ := applycheck.Judge(res, applycheck.Applier{ServerSide: true, Name: "Helm applies this release", Manager: "helm"})

			if c.says == "" {
				require.NoError(t, oracle, "the case's own premise: the server stores it")
				assert.Empty(t, refused)
				return
			}
			require.Error(t, oracle, "the case's own premise: the server refuses it")
			require.True(t, apierrors.IsInvalid(oracle), "%v", oracle)
			assert.Contains(t, oracle.Error(), c.says, "the case's own premise: the server's words")
			require.Len(t, refused, 1, "%v", refused)
			assert.Contains(t, refused[0], c.says)
			assert.Contains(t, refused[0], "rejected by the API server: Gauge "+ns+"/g")
			// the same causes, field by field
			for _, cause := range oracle.(apierrors.APIStatus).Status().Details.Causes {
				assert.Contains(t, refused[0], cause.Field+": ", "the server's cause %q", cause.Message)
			}
			if c.create {
				assert.True(t, strings.Contains(refused[0], "would fail creating it"), refused[0])
			}
		})
	}
}

// A custom resource of a CRD the upgrade applies first (apply.crds), its
// kind not served yet, is validated by that CRD's rules, in the release's
// namespace where the chart names none, as the apply will create it.
func TestCustomResourcesOfACRDAppliedFirst(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	crd := decode(t, strings.ReplaceAll(gaugeCRD, "rules.example.com", "later.example.com"))
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Kube().Discovery()))
	for spec, says := range map[string]string{
		"{mode: fast, min: 0, max: 1}": "",
		"{mode: slow, min: 0, max: 1}": `spec.mode: Unsupported value: "slow"`,
		"{mode: fast, min: 2, max: 1}": "min must not exceed max",
	} {
		want := decode(t, strings.ReplaceAll(gauge("g", spec), "rules.example.com", "later.example.com"))
		res, err := applycheck.New(env.Kube(), env.Dynamic(), mapper, nil).Check(t.Context(),
			applycheck.Request{Manifest: manifestOf(t, want), Namespace: ns, Manager: "helm", CRDs: []*unstructured.Unstructured{crd}})
		require.NoError(t, err)
		refused, _ := applycheck.Judge(res, applycheck.Applier{ServerSide: true, Name: "Helm applies this release", Manager: "helm"})
		if says == "" {
			assert.Empty(t, refused, spec)
			continue
		}
		if assert.Len(t, refused, 1, spec) {
			assert.Contains(t, refused[0], says)
			assert.Contains(t, refused[0], "would fail creating it")
		}
	}
}
