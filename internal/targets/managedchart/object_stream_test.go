package managedchart

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

func toJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

func TestDecodeListOneItemAtATime(t *testing.T) {
	a, b := bundle(), bundle()
	b.SetName("mcc-app-2")
	list := `{"kind":"BundleList","apiVersion":"fleet.cattle.io/v1alpha1",` +
		`"metadata":{"resourceVersion":"99","continue":""},"items":[` + toJSON(t, a.Object) + "," + toJSON(t, b.Object) + `]}`
	var items []*unstructured.Unstructured
	decode := func(list string, item func(*unstructured.Unstructured)) (string, error) {
		return decodeList(newJSONStream(strings.NewReader(list)), func(v []byte) error {
			u, err := cutObjectJSON(v, bundleCuts)
			if err == nil {
				item(u)
			}
			return err
		})
	}
	rv, err := decode(list, func(u *unstructured.Unstructured) { items = append(items, u) })
	require.NoError(t, err)
	assert.Equal(t, "99", rv)
	require.Len(t, items, 2)
	assert.Equal(t, []string{a.GetName(), b.GetName()}, []string{items[0].GetName(), items[1].GetName()})
	_, found, _ := unstructured.NestedFieldNoCopy(items[0].Object, "spec", "resources")
	assert.False(t, found, "the chart's files are cut")
	assert.Equal(t, ParseBundle(a).Status, ParseBundle(items[0]).Status)

	for _, empty := range []string{`{"metadata":{"resourceVersion":"5"},"items":[]}`, `{"items":null,"metadata":{"resourceVersion":"5"}}`} {
		rv, err := decode(empty, func(*unstructured.Unstructured) { t.Error("an item of nothing") })
		require.NoError(t, err, empty)
		assert.Equal(t, "5", rv)
	}
	_, err = decode(`{"items":{}}`, func(*unstructured.Unstructured) {})
	assert.ErrorContains(t, err, "want an array")
	_, err = decode(`{"items":[`+toJSON(t, a.Object), func(*unstructured.Unstructured) {})
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestObjWatchDecoderReadsEveryKindOfEvent(t *testing.T) {
	b := bundle()
	expired := apierrors.NewResourceExpired("too old resource version: 1 (42)").ErrStatus
	stream := strings.Join([]string{
		`{"type":"ADDED","object":` + toJSON(t, b.Object) + `}`,
		`{"type":"BOOKMARK","object":{"kind":"Bundle","apiVersion":"fleet.cattle.io/v1alpha1","metadata":{"resourceVersion":"120","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"object":` + toJSON(t, b.Object) + `,"type":"DELETED"}`, // the type after the object
		`{"type":"ERROR","object":` + toJSON(t, expired) + `}`,
	}, "\n")
	d := &objWatchDecoder{s: newJSONStream(strings.NewReader(stream)), close: func() error { return nil }, cuts: bundleCuts}

	typ, obj, err := d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Added, typ)
	assert.Equal(t, ParseBundle(b).Status, ParseBundle(obj.(*unstructured.Unstructured)).Status)
	_, found, _ := unstructured.NestedFieldNoCopy(obj.(*unstructured.Unstructured).Object, "spec", "resources")
	assert.False(t, found, "the chart's files are cut")

	typ, obj, err = d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Bookmark, typ)
	assert.Equal(t, "120", obj.(*unstructured.Unstructured).GetResourceVersion())

	typ, obj, err = d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Deleted, typ)
	assert.Equal(t, b.GetName(), obj.(*unstructured.Unstructured).GetName())

	typ, obj, err = d.Decode()
	require.NoError(t, err)
	assert.Equal(t, watch.Error, typ)
	assert.True(t, apierrors.IsResourceExpired(apierrors.FromObject(obj)), "listed again at once")

	_, _, err = d.Decode()
	assert.Equal(t, io.EOF, err, "the end of the stream is io.EOF itself: the API server closed the watch")

	cut := `{"type":"MODIFIED","object":` + toJSON(t, b.Object)[:80]
	d = &objWatchDecoder{s: newJSONStream(strings.NewReader(cut)), cuts: bundleCuts}
	_, _, err = d.Decode()
	assert.Equal(t, io.ErrUnexpectedEOF, err, "a cut stream is told apart from a bad event")

	d = &objWatchDecoder{s: newJSONStream(strings.NewReader(`{"type":"ADDED"}`)), cuts: bundleCuts}
	_, _, err = d.Decode()
	assert.ErrorContains(t, err, "without an object")
}
