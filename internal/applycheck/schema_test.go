package applycheck

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
)

// openAPIWithout is an OpenAPI v3 index that lists only the group-versions
// it is given: the one fault a real API server here cannot show (an
// aggregated API that publishes no schema).
type openAPIWithout struct {
	paths map[string]openapi.GroupVersion
	err   error
}

func (o openAPIWithout) Paths() (map[string]openapi.GroupVersion, error) { return o.paths, o.err }

// A group-version the cluster publishes no schema for is a reason, naming
// it, not a silent skip; so is an index that cannot be read.
func TestAKindWithoutASchemaIsNamed(t *testing.T) {
	s := &Schemas{OpenAPI: openAPIWithout{paths: map[string]openapi.GroupVersion{}}}
	_, err := s.Converter(t.Context(), schema.GroupVersionKind{Group: "metrics.example.com", Version: "v1beta1", Kind: "PodMetrics"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, errNoSchema))
	assert.Equal(t, "metrics.example.com/v1beta1: the cluster publishes no OpenAPI v3 schema for it", err.Error())

	s = &Schemas{OpenAPI: openAPIWithout{err: errors.New("the server could not find the requested resource")}}
	_, err = s.Converter(t.Context(), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	assert.EqualError(t, err, "reading the cluster's OpenAPI v3 index (/openapi/v3): the server could not find the requested resource")
}

// A document without schemas, or without the kind's, is the same reason;
// a schema that refers to one the document lacks is named.
func TestADocumentWithoutTheKindsSchemaIsNamed(t *testing.T) {
	gv := schema.GroupVersion{Group: "x.example.com", Version: "v1"}
	_, _, _, err := index(gv, []byte(`{"openapi":"3.0.0","paths":{}}`))
	assert.ErrorIs(t, err, errNoSchema)
	_, _, _, err = index(schema.GroupVersion{Version: "v1"}, []byte(`{`))
	assert.ErrorContains(t, err, "decoding the OpenAPI v3 schema of v1")

	raw, byKind, _, err := index(gv, []byte(`{"components":{"schemas":{
		"x.Widget":{"type":"object","properties":{"spec":{"$ref":"#/components/schemas/x.Missing"}},
			"x-kubernetes-group-version-kind":[{"group":"x.example.com","version":"v1","kind":"Widget"}]}}}}`))
	require.NoError(t, err)
	d := &gvDoc{raw: raw, byKind: byKind}
	_, err = d.converter(gv.WithKind("Gadget"))
	assert.ErrorIs(t, err, errNoSchema)
	_, err = d.converter(gv.WithKind("Widget"))
	assert.EqualError(t, err, "the OpenAPI v3 schema of x.example.com/v1, Kind=Widget refers to x.Missing, which it does not hold")
}

// The kinds served with a status subresource are read from the paths of
// their group-version's document: the API server resets their status on
// a write of the object itself.
func TestStatusSubresourcesAreReadFromThePaths(t *testing.T) {
	gv := schema.GroupVersion{Group: "x.example.com", Version: "v1"}
	_, _, status, err := index(gv, []byte(`{"paths":{
		"/apis/x.example.com/v1/namespaces/{namespace}/widgets/{name}/status":{
			"parameters":[{"name":"name"}],
			"get":{"x-kubernetes-group-version-kind":{"group":"x.example.com","version":"v1","kind":"Widget"}}},
		"/apis/x.example.com/v1/namespaces/{namespace}/gadgets/{name}":{
			"get":{"x-kubernetes-group-version-kind":{"group":"x.example.com","version":"v1","kind":"Gadget"}}},
		"/apis/x.example.com/v1/namespaces/{namespace}/gadgets/{name}/scale":{
			"get":{"x-kubernetes-group-version-kind":{"group":"autoscaling","version":"v1","kind":"Scale"}}}},
		"components":{"schemas":{
		"x.Widget":{"type":"object","x-kubernetes-group-version-kind":[{"group":"x.example.com","version":"v1","kind":"Widget"}]},
		"x.Gadget":{"type":"object","x-kubernetes-group-version-kind":[{"group":"x.example.com","version":"v1","kind":"Gadget"}]}}}}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"Widget": true}, status)
}
