package managedchart

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	it, err := readBD(&jsonReader{data: []byte(toJSON(t, full.Object))})
	require.NoError(t, err)
	assert.Equal(t, ParseBundleDeployment(full), it.BD)
	assert.Equal(t, "42", it.ResourceVersion)
	assert.Equal(t, "cluster-fleet-local-c-1/mcc-app", it.key())

	// a field of another type is left empty, as the unstructured reader
	// leaves it, and the rest is still read
	odd := full.DeepCopy()
	odd.Object["status"].(map[string]any)["ready"] = "yes"
	nr := odd.Object["status"].(map[string]any)["nonReadyStatus"].([]any)[0].(map[string]any)
	nr["summary"].(map[string]any)["message"] = []any{"rolling out", int64(3), "slowly"}
	it, err = readBD(&jsonReader{data: []byte(toJSON(t, odd.Object))})
	require.NoError(t, err)
	assert.Equal(t, ParseBundleDeployment(odd), it.BD)
	assert.Equal(t, []string{"Deployment demo/app: in-progress; rolling out; slowly"}, it.BD.NonReady)

	// the agent could not deploy: its Deployed condition is False; other
	// conditions, and elements that are not objects, are read past
	for _, conds := range [][]any{
		{map[string]any{"type": "Installed", "status": "False", "message": "x"},
			map[string]any{"type": "Deployed", "status": "False", "message": "boom: nil pointer"}, "odd", int64(1)},
		{map[string]any{"type": "Deployed", "status": "False"}},
		{map[string]any{"type": "Deployed", "status": "True", "message": "fine"}},
		{},
	} {
		failed := full.DeepCopy()
		failed.Object["status"].(map[string]any)["conditions"] = conds
		it, err = readBD(&jsonReader{data: []byte(toJSON(t, failed.Object))})
		require.NoError(t, err)
		assert.Equal(t, ParseBundleDeployment(failed), it.BD, "%v", conds)
	}
	failed := full.DeepCopy()
	failed.Object["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Deployed", "status": "False", "message": "boom"}}
	assert.Equal(t, "boom", ParseBundleDeployment(failed).DeployError)
}

func TestDecodeBDListOneItemAtATime(t *testing.T) {
	a, b := bundleDeployment(), bundleDeployment()
	b.SetName("mcc-app-2")
	list := `{"kind":"BundleDeploymentList","apiVersion":"fleet.cattle.io/v1alpha1",` +
		`"metadata":{"resourceVersion":"99","continue":""},"items":[` + toJSON(t, a.Object) + "," + toJSON(t, b.Object) + `]}`
	var items []bdItem
	decode := func(list string, item func(bdItem)) (string, error) {
		return decodeList(newJSONStream(strings.NewReader(list)), func(v []byte) error {
			it, err := readBD(&jsonReader{data: v})
			if err == nil {
				item(it)
			}
			return err
		})
	}
	rv, err := decode(list, func(it bdItem) { items = append(items, it) })
	require.NoError(t, err)
	assert.Equal(t, "99", rv)
	require.Len(t, items, 2)
	assert.Equal(t, ParseBundleDeployment(a), items[0].BD)
	assert.Equal(t, ParseBundleDeployment(b), items[1].BD)

	for _, empty := range []string{`{"metadata":{"resourceVersion":"5"},"items":[]}`, `{"items":null,"metadata":{"resourceVersion":"5"}}`} {
		rv, err := decode(empty, func(bdItem) { t.Error("an item of nothing") })
		require.NoError(t, err, empty)
		assert.Equal(t, "5", rv)
	}
	_, err = decode(`{"items":{}}`, func(bdItem) {})
	assert.ErrorContains(t, err, "want an array")
	_, err = decode(`{"items":[`+toJSON(t, a.Object), func(bdItem) {})
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
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

	ev, err := d.next()
	require.NoError(t, err)
	assert.Equal(t, watch.Added, ev.Type)
	assert.Equal(t, ParseBundleDeployment(bd), ev.Item.BD)

	ev, err = d.next()
	require.NoError(t, err)
	assert.Equal(t, watch.Bookmark, ev.Type)
	assert.Equal(t, "120", ev.Item.ResourceVersion)

	ev, err = d.next()
	require.NoError(t, err)
	assert.Equal(t, watch.Deleted, ev.Type)
	assert.Equal(t, "cluster-fleet-local-c-1/mcc-app", ev.Item.key())

	ev, err = d.next()
	require.NoError(t, err)
	assert.Equal(t, watch.Error, ev.Type)
	require.NotNil(t, ev.Err)
	assert.True(t, apierrors.IsResourceExpired(apierrors.FromObject(ev.Err)), "listed again at once")

	_, err = d.next()
	assert.Equal(t, io.EOF, err, "the end of the stream is io.EOF itself: the API server closed the watch")

	cut := `{"type":"MODIFIED","object":` + toJSON(t, bd.Object)[:80]
	d = &bdWatchDecoder{s: newJSONStream(strings.NewReader(cut))}
	_, err = d.next()
	assert.Equal(t, io.ErrUnexpectedEOF, err, "a cut stream is told apart from a bad event")

	d = &bdWatchDecoder{s: newJSONStream(strings.NewReader(`{"type":"ADDED"}`))}
	_, err = d.next()
	assert.ErrorContains(t, err, "without an object")
}
