package managedchart

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
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

// rawRequest is a GET of the gvr objects of namespace ("": of every
// namespace) with opts, answered in JSON, for a reader of the stream.
func (c *Client) rawRequest(gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) *rest.Request {
	path := []string{"/apis", gvr.Group, gvr.Version}
	if namespace != "" {
		path = append(path, "namespaces", namespace)
	}
	return c.Kube.CoreV1().RESTClient().Get().AbsPath(append(path, gvr.Resource)...).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		SetHeader("Accept", "application/json")
}

// decodeList decodes a list one item at a time, handing each item's JSON
// (valid during the call) to item, and returns its resourceVersion.
func decodeList(s *jsonStream, item func([]byte) error) (rv string, err error) {
	rv, _, err = decodeListPage(s, item)
	return rv, err
}

// decodeListPage is decodeList that also returns the list's continue
// token ("" on its last page).
func decodeListPage(s *jsonStream, item func([]byte) error) (rv, cont string, err error) {
	if err := s.punct('{'); err != nil {
		return "", "", err
	}
	for {
		if c, err := s.peek(); err != nil || c == '}' {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return rv, cont, err
		}
		k, err := s.value()
		if err != nil {
			return "", "", err
		}
		key, err := (&jsonReader{data: k}).str()
		if err != nil {
			return "", "", err
		}
		if err := s.punct(':'); err != nil {
			return "", "", err
		}
		switch key {
		case "items":
			if err := decodeItems(s, item); err != nil {
				return "", "", fmt.Errorf("items: %w", err)
			}
		case "metadata":
			v, err := s.value()
			if err != nil {
				return "", "", err
			}
			r := &jsonReader{data: v}
			rv, cont = "", ""
			if err := r.object(func(key []byte) error {
				switch string(key) {
				case "resourceVersion":
					rv, err = r.str()
					return err
				case "continue":
					cont, err = r.str()
					return err
				}
				return r.skip()
			}); err != nil {
				return "", "", fmt.Errorf("metadata: %w", err)
			}
		default:
			if _, err := s.value(); err != nil {
				return "", "", err
			}
		}
		if c, err := s.peek(); err == nil && c == ',' {
			s.off++
		}
	}
}

// decodeItems decodes the items of a list, one at a time.
func decodeItems(s *jsonStream, item func([]byte) error) error {
	err := func() error {
		if c, err := s.peek(); err != nil || c != '[' {
			if err == nil && c != 'n' {
				err = fmt.Errorf("want an array, have %q", c)
			}
			if err == nil {
				_, err = s.value() // null: no items
			}
			return err
		}
		s.off++
		for {
			c, err := s.peek()
			if err != nil {
				return err
			}
			switch c {
			case ']':
				s.off++
				return nil
			case ',':
				s.off++
				continue
			}
			v, err := s.value()
			if err != nil {
				return err
			}
			if err := item(v); err != nil {
				return err
			}
		}
	}()
	if err == io.EOF { // within the list
		err = io.ErrUnexpectedEOF
	}
	return err
}

// decodeEvent reads the next watch event, {"type": …, "object": …}, and
// hands its object to object with the event's type; it returns the type.
// Its errors are the stream's own, which the watch tells apart: io.EOF at
// its end (the API server closed it), io.ErrUnexpectedEOF or the
// connection's error when it was cut.
func decodeEvent(s *jsonStream, object func(watch.EventType, *jsonReader) error) (watch.EventType, error) {
	v, err := s.value()
	if err != nil {
		return "", err
	}
	var (
		typ watch.EventType
		got bool
		raw []byte // an object before its type (the API server sends the type first)
	)
	r := &jsonReader{data: v}
	err = r.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "type":
			var t string
			t, err = r.str()
			typ = watch.EventType(t)
		case "object":
			if typ == "" {
				raw, err = r.raw()
			} else {
				got, err = true, object(typ, r)
			}
		default:
			err = r.skip()
		}
		return err
	})
	if err == nil && !got && raw != nil {
		got, err = true, object(typ, &jsonReader{data: raw})
	}
	if err == nil && !got {
		err = fmt.Errorf("a watch event without an object: %.200s", v)
	}
	if err != nil {
		return "", fmt.Errorf("decoding a watch event: %w", err)
	}
	return typ, nil
}

// readStatus reads the Status of an ERROR event.
func readStatus(r *jsonReader, s *metav1.Status) error {
	v, err := r.raw()
	if err != nil {
		return err
	}
	return json.Unmarshal(v, s)
}
