package managedchart

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// BundleDeployments are many (one per downstream cluster) and large
// (Fleet's copy of the Helm values, twice, and the resource lists), and
// readiness reads a few fields of each. So they are read as a stream of
// JSON and decoded straight into those fields: nothing else of them is
// ever built, a list is held one item at a time however long it is, and
// memory grows with the fields used, not with Fleet's objects.

// bdObject is a BundleDeployment as the Observer's informer keeps it: the
// metadata an informer needs and what readiness reads.
type bdObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta // namespace, name, uid, resourceVersion
	BD                BundleDeployment
}

func (o *bdObject) DeepCopyObject() runtime.Object {
	c := &bdObject{TypeMeta: o.TypeMeta, BD: o.BD}
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.BD.NonReady = slices.Clone(o.BD.NonReady)
	return c
}

// bdList is a list of them, as the informer's list returns it.
type bdList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []bdObject
}

func (l *bdList) DeepCopyObject() runtime.Object {
	c := &bdList{TypeMeta: l.TypeMeta, Items: make([]bdObject, len(l.Items))}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*bdObject)
	}
	return c
}

// readBD reads a BundleDeployment: what ParseBundleDeployment reads of
// it, and the metadata the informer needs. Of a key given twice the last
// counts, as in a decoded map; a field of another type reads as absent, as
// ParseBundleDeployment reads it.
func readBD(r *jsonReader) (bdObject, error) {
	var o bdObject
	err := r.object(func(key []byte) error {
		switch string(key) {
		case "metadata":
			o.ObjectMeta = metav1.ObjectMeta{}
			return r.object(func(key []byte) error {
				var err error
				var uid string
				switch string(key) {
				case "name":
					o.Name, err = r.str()
				case "namespace":
					o.Namespace, err = r.str()
				case "uid":
					uid, err = r.str()
					o.UID = types.UID(uid)
				case "resourceVersion":
					o.ResourceVersion, err = r.str()
				default:
					err = r.skip()
				}
				return err
			})
		case "spec":
			o.BD.DeploymentID, o.BD.StagedDeploymentID = "", ""
			return r.object(func(key []byte) error {
				var err error
				switch string(key) {
				case "deploymentID":
					o.BD.DeploymentID, err = r.str()
				case "stagedDeploymentID":
					o.BD.StagedDeploymentID, err = r.str()
				default:
					err = r.skip()
				}
				return err
			})
		case "status":
			o.BD.AppliedDeploymentID, o.BD.Ready, o.BD.NonReady = "", false, nil
			return r.object(func(key []byte) error {
				var err error
				switch string(key) {
				case "appliedDeploymentID":
					o.BD.AppliedDeploymentID, err = r.str()
				case "ready":
					o.BD.Ready, err = r.boolean()
				case "nonReadyStatus":
					o.BD.NonReady, err = readNonReadyStatus(r)
				default:
					err = r.skip()
				}
				return err
			})
		}
		return r.skip()
	})
	o.BD.Namespace, o.BD.Name = o.Namespace, o.Name
	return o, err
}

// readNonReadyStatus reads a BundleDeployment's status.nonReadyStatus as
// ParseBundleDeployment does: a line per object entry (objectLine).
func readNonReadyStatus(r *jsonReader) ([]string, error) {
	var lines []string
	err := r.array(func() error {
		if r.next() != '{' {
			return r.skip()
		}
		var kind, namespace, name, state string
		var messages []any
		err := r.object(func(key []byte) error {
			var err error
			switch string(key) {
			case "kind":
				kind, err = r.str()
			case "namespace":
				namespace, err = r.str()
			case "name":
				name, err = r.str()
			case "summary":
				state, messages = "", nil
				err = r.object(func(key []byte) error {
					var err error
					switch string(key) {
					case "state":
						state, err = r.str()
					case "message":
						messages = nil
						err = r.array(func() error {
							if r.next() != '"' {
								return r.skip()
							}
							m, err := r.str()
							messages = append(messages, m)
							return err
						})
					default:
						err = r.skip()
					}
					return err
				})
			default:
				err = r.skip()
			}
			return err
		})
		lines = append(lines, renderObjectLine(kind, namespace, name, state, messages))
		return err
	})
	return lines, err
}

// bdRequest is a GET of the BundleDeployments of every namespace with
// opts, answered in JSON.
func (c *Client) bdRequest(opts metav1.ListOptions) *rest.Request {
	gvr := BundleDeploymentGVR
	return c.Kube.CoreV1().RESTClient().Get().AbsPath("/apis", gvr.Group, gvr.Version, gvr.Resource).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		SetHeader("Accept", "application/json")
}

// listBundleDeployments lists the BundleDeployments opts select in one
// request (no pages: opts.Limit and Continue are dropped), decoding them
// as they arrive.
func (c *Client) listBundleDeployments(ctx context.Context, opts metav1.ListOptions) (*bdList, error) {
	opts.Limit, opts.Continue = 0, ""
	body, err := c.bdRequest(opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	l, err := decodeBDList(newJSONStream(body))
	if err != nil {
		return nil, fmt.Errorf("decoding the list of bundledeployments: %w", err)
	}
	return l, nil
}

// watchBundleDeployments watches the BundleDeployments opts select.
func (c *Client) watchBundleDeployments(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	body, err := c.bdRequest(opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(&bdWatchDecoder{body: body, s: newJSONStream(body)},
		// as client-go reports what it cannot decode
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// decodeBDList decodes a BundleDeploymentList one item at a time.
func decodeBDList(s *jsonStream) (*bdList, error) {
	l := &bdList{}
	if err := s.punct('{'); err != nil {
		return nil, err
	}
	for {
		if c, err := s.peek(); err != nil || c == '}' {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return l, err
		}
		k, err := s.value()
		if err != nil {
			return nil, err
		}
		key, err := (&jsonReader{data: k}).str()
		if err != nil {
			return nil, err
		}
		if err := s.punct(':'); err != nil {
			return nil, err
		}
		switch key {
		case "items":
			if err := decodeBDItems(s, l); err != nil {
				return nil, fmt.Errorf("items: %w", err)
			}
		case "metadata":
			v, err := s.value()
			if err != nil {
				return nil, err
			}
			r := &jsonReader{data: v}
			l.ListMeta = metav1.ListMeta{}
			if err := r.object(func(key []byte) error {
				var err error
				switch string(key) {
				case "resourceVersion":
					l.ResourceVersion, err = r.str()
				case "continue":
					l.Continue, err = r.str()
				default:
					err = r.skip()
				}
				return err
			}); err != nil {
				return nil, fmt.Errorf("metadata: %w", err)
			}
		default:
			if _, err := s.value(); err != nil {
				return nil, err
			}
		}
		if c, err := s.peek(); err == nil && c == ',' {
			s.off++
		}
	}
}

// decodeBDItems decodes the items of a list into l, one at a time.
func decodeBDItems(s *jsonStream, l *bdList) error {
	l.Items = l.Items[:0]
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
		o, err := readBD(&jsonReader{data: v})
		if err != nil {
			return err
		}
		l.Items = append(l.Items, o)
	}
}

// bdWatchDecoder decodes the events of a watch of BundleDeployments:
// {"type": …, "object": …} each, the object a BundleDeployment or, for an
// ERROR, a Status.
type bdWatchDecoder struct {
	body io.Closer
	s    *jsonStream
}

// Decode returns the next event. Its errors are the stream's own, which
// the watch machinery tells apart: io.EOF at its end, io.ErrUnexpectedEOF
// or the connection's error when it was cut.
func (d *bdWatchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	v, err := d.s.value()
	if err != nil {
		return "", nil, err
	}
	var (
		typ string
		obj runtime.Object
		raw []byte // an object before its type (the API server sends the type first)
	)
	r := &jsonReader{data: v}
	err = r.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "type":
			typ, err = r.str()
		case "object":
			if typ == "" {
				raw, err = r.raw()
			} else {
				obj, err = eventObject(watch.EventType(typ), r)
			}
		default:
			err = r.skip()
		}
		return err
	})
	if err == nil && obj == nil && raw != nil {
		obj, err = eventObject(watch.EventType(typ), &jsonReader{data: raw})
	}
	if err == nil && obj == nil {
		err = fmt.Errorf("a watch event without an object: %.200s", v)
	}
	if err != nil {
		return "", nil, fmt.Errorf("decoding a watch event of bundledeployments: %w", err)
	}
	return watch.EventType(typ), obj, nil
}

func (d *bdWatchDecoder) Close() {
	if d.body != nil {
		_ = d.body.Close()
	}
}

// eventObject reads the object of a watch event of type typ.
func eventObject(typ watch.EventType, r *jsonReader) (runtime.Object, error) {
	if typ == watch.Error {
		v, err := r.raw()
		if err != nil {
			return nil, err
		}
		var s metav1.Status
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		return &s, nil
	}
	o, err := readBD(r)
	if err != nil {
		return nil, err
	}
	return &o, nil
}
