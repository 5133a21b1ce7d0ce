package managedchart

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// What the watch never reads of a ManagedChart and of a Bundle, cut from
// every event before it is decoded: the managedFields, Rancher's copy of
// the Bundle status but its conditions (readiness reads the Bundle's own
// status, and the ManagedChart's Defined condition), and the chart's files
// a Bundle carries (hundreds of kilobytes for a large chart, sent again
// with every status write).
var (
	managedChartCuts = [][]string{{"metadata", "managedFields"}, {"status", "summary"}, {"status", "display"},
		{"status", "partitions"}, {"status", "resourceKey"}}
	bundleCuts = [][]string{{"metadata", "managedFields"}, {"spec", "resources"}}
)

// namedObject lists and watches the gvr object namespace/name, each
// decoded as an unstructured object without the members at cuts.
func (c *Client) namedObject(gvr schema.GroupVersionResource, namespace, name string, cuts [][]string) *cache.ListWatch {
	byName := func(opts metav1.ListOptions) metav1.ListOptions {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		opts.Limit, opts.Continue = 0, ""
		return opts
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			body, err := c.rawRequest(gvr, namespace, byName(opts)).Stream(ctx)
			if err != nil {
				return nil, err
			}
			defer body.Close()
			list := &unstructured.UnstructuredList{}
			rv, err := decodeList(newJSONStream(body), func(v []byte) error {
				u, err := cutObjectJSON(v, cuts)
				if err == nil {
					list.Items = append(list.Items, *u)
				}
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("decoding the list of %s: %w", gvr.Resource, err)
			}
			list.SetResourceVersion(rv)
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts = byName(opts)
			opts.Watch = true
			body, err := c.rawRequest(gvr, namespace, opts).Stream(ctx)
			if err != nil {
				return nil, err
			}
			return watch.NewStreamWatcher(&objWatchDecoder{s: newJSONStream(body), close: body.Close, cuts: cuts},
				// as client-go reports what it cannot decode
				apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
		},
	}
}

// cutObjectJSON decodes an object's JSON without the members at cuts, as
// the dynamic client decodes it.
func cutObjectJSON(data []byte, cuts [][]string) (*unstructured.Unstructured, error) {
	slim, err := cutJSON(data, cuts)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(slim); err != nil {
		return nil, err
	}
	return u, nil
}

// objWatchDecoder decodes the events of a watch into unstructured objects
// without the members at cuts (a Status for an ERROR), for client-go's
// watch.
type objWatchDecoder struct {
	s     *jsonStream
	close func() error
	cuts  [][]string
}

func (d *objWatchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var obj runtime.Object
	typ, err := decodeEvent(d.s, func(typ watch.EventType, r *jsonReader) error {
		if typ == watch.Error {
			s := &metav1.Status{}
			obj = s
			return readStatus(r, s)
		}
		v, err := r.raw()
		if err != nil {
			return err
		}
		u, err := cutObjectJSON(v, d.cuts)
		if err == nil {
			obj = u
		}
		return err
	})
	return typ, obj, err
}

func (d *objWatchDecoder) Close() { _ = d.close() }
