package managedchart

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func toJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

func TestDecodedBundleDeploymentIsWhatParseReads(t *testing.T) {
	full := bundleDeployment()
	got, err := eventObject(watch.Added, &jsonReader{data: []byte(toJSON(t, full.Object))})
	require.NoError(t, err)
	o := got.(*bdObject)
	assert.Equal(t, ParseBundleDeployment(full), o.BD)
	assert.Equal(t, "42", o.GetResourceVersion())
	assert.Equal(t, "u-1", string(o.GetUID()))
	assert.Equal(t, "cluster-fleet-local-c-1", o.GetNamespace())
	assert.Nil(t, o.GetLabels(), "nothing but what readiness and the informer read is kept")

	// a field of another type is left empty, as the unstructured reader
	// leaves it, and the rest is still read
	odd := full.DeepCopy()
	odd.Object["status"].(map[string]any)["ready"] = "yes"
	nr := odd.Object["status"].(map[string]any)["nonReadyStatus"].([]any)[0].(map[string]any)
	nr["summary"].(map[string]any)["message"] = []any{"rolling out", int64(3), "slowly"}
	got, err = eventObject(watch.Modified, &jsonReader{data: []byte(toJSON(t, odd.Object))})
	require.NoError(t, err)
	assert.Equal(t, ParseBundleDeployment(odd), got.(*bdObject).BD)
	assert.Equal(t, []string{"Deployment demo/app: in-progress; rolling out; slowly"}, got.(*bdObject).BD.NonReady)

	c := o.DeepCopyObject().(*bdObject)
	c.BD.NonReady[0] = "changed"
	assert.NotEqual(t, "changed", o.BD.NonReady[0], "a deep copy shares nothing")
}

func TestDecodeBDListOneItemAtATime(t *testing.T) {
	a, b := bundleDeployment(), bundleDeployment()
	b.SetName("mcc-app-2")
	list := `{"kind":"BundleDeploymentList","apiVersion":"fleet.cattle.io/v1alpha1",` +
		`"metadata":{"resourceVersion":"99","continue":""},"items":[` + toJSON(t, a.Object) + "," + toJSON(t, b.Object) + `]}`
	l, err := decodeBDList(newJSONStream(strings.NewReader(list)))
	require.NoError(t, err)
	require.Len(t, l.Items, 2)
	assert.Equal(t, ParseBundleDeployment(a), l.Items[0].BD)
	assert.Equal(t, ParseBundleDeployment(b), l.Items[1].BD)

	// what client-go's reflector reads of a list
	la, err := meta.ListAccessor(l)
	require.NoError(t, err)
	assert.Equal(t, "99", la.GetResourceVersion())
	items, err := meta.ExtractList(l)
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.IsType(t, &bdObject{}, items[0])

	for _, empty := range []string{`{"metadata":{"resourceVersion":"5"},"items":[]}`, `{"items":null,"metadata":{"resourceVersion":"5"}}`} {
		l, err := decodeBDList(newJSONStream(strings.NewReader(empty)))
		require.NoError(t, err, empty)
		assert.Empty(t, l.Items)
		assert.Equal(t, "5", l.ResourceVersion)
	}
	_, err = decodeBDList(newJSONStream(strings.NewReader(`{"items":{}}`)))
	assert.ErrorContains(t, err, "want an array")
}

func TestBDWatchDecoderReadsEveryKindOfEvent(t *testing.T) {
	bd := bundleDeployment()
	expired := apierrors.NewResourceExpired("too old resource version: 1 (42)").ErrStatus
	stream := strings.Join([]string{
		`{"type":"ADDED","object":` + toJSON(t, bd.Object) + `}`,
		`{"type":"BOOKMARK","object":{"kind":"BundleDeployment","apiVersion":"fleet.cattle.io/v1alpha1","metadata":{"resourceVersion":"120","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"object":` + toJSON(t, bd.Object) + `,"type":"DELETED"}`, // the type after the object
		`{"type":"ERROR","object":` + toJSON(t, expired) + `}`,
	}, "\n")
	d := &bdWatchDecoder{s: newJSONStream(strings.NewReader(stream))}

	typ, obj, err := d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Added, typ)
	assert.Equal(t, ParseBundleDeployment(bd), obj.(*bdObject).BD)

	typ, obj, err = d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Bookmark, typ)
	assert.Equal(t, "120", obj.(*bdObject).GetResourceVersion())

	typ, obj, err = d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Deleted, typ)
	assert.Equal(t, "mcc-app", obj.(*bdObject).GetName())

	typ, obj, err = d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Error, typ)
	require.IsType(t, &metav1.Status{}, obj)
	assert.True(t, apierrors.IsResourceExpired(apierrors.FromObject(obj)), "the reflector re-lists on it")

	_, _, err = d.Decode()
	assert.Equal(t, io.EOF, err, "the end of the stream is io.EOF itself: a watch closed normally")

	cut := `{"type":"MODIFIED","object":` + toJSON(t, bd.Object)[:80]
	d = &bdWatchDecoder{s: newJSONStream(strings.NewReader(cut))}
	_, _, err = d.Decode()
	assert.Equal(t, io.ErrUnexpectedEOF, err, "a cut stream is told apart, not reported as a bad event")
}

func TestBDObjectIsWhatTheInformerStores(t *testing.T) {
	var o any = &bdObject{}
	_, err := meta.Accessor(o)
	require.NoError(t, err, "the informer keys it by its metadata")
}
