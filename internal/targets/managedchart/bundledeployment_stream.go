package managedchart

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// BundleDeployments are many (one per downstream cluster) and large
// (Fleet's copy of the Helm values, twice, and the resource lists), and
// readiness reads a few fields of each. So they are read as a stream of
// JSON and decoded straight into those fields: nothing else of them is
// ever built, a list is held one item at a time however long it is, and
// memory grows with the fields used, not with Fleet's objects.

// bdItem is one BundleDeployment as read: what readiness reads of it, and
// the resourceVersion it was read at.
type bdItem struct {
	BD              BundleDeployment
	ResourceVersion string
}

func (i bdItem) key() string { return i.BD.Namespace + "/" + i.BD.Name }

// readBD reads a BundleDeployment: what ParseBundleDeployment reads of
// it, and its resourceVersion. Of a key given twice the last counts, as in
// a decoded map; a field of another type reads as absent, as
// ParseBundleDeployment reads it.
func readBD(r *jsonReader) (bdItem, error) {
	var it bdItem
	bd := &it.BD
	err := r.object(func(key []byte) error {
		switch string(key) {
		case "metadata":
			bd.Namespace, bd.Name, it.ResourceVersion = "", "", ""
			return r.object(func(key []byte) error {
				var err error
				switch string(key) {
				case "name":
					bd.Name, err = r.str()
				case "namespace":
					bd.Namespace, err = r.str()
				case "resourceVersion":
					it.ResourceVersion, err = r.str()
				default:
					err = r.skip()
				}
				return err
			})
		case "spec":
			bd.DeploymentID, bd.StagedDeploymentID = "", ""
			return r.object(func(key []byte) error {
				var err error
				switch string(key) {
				case "deploymentID":
					bd.DeploymentID, err = r.str()
				case "stagedDeploymentID":
					bd.StagedDeploymentID, err = r.str()
				default:
					err = r.skip()
				}
				return err
			})
		case "status":
			bd.AppliedDeploymentID, bd.Ready, bd.NonReady, bd.DeployError = "", false, nil, ""
			return r.object(func(key []byte) error {
				var err error
				switch string(key) {
				case "appliedDeploymentID":
					bd.AppliedDeploymentID, err = r.str()
				case "ready":
					bd.Ready, err = r.boolean()
				case "nonReadyStatus":
					bd.NonReady, err = readNonReadyStatus(r)
				case "conditions":
					bd.DeployError, err = readDeployError(r)
				default:
					err = r.skip()
				}
				return err
			})
		}
		return r.skip()
	})
	return it, err
}

// readDeployError reads a BundleDeployment's status.conditions as
// ParseBundleDeployment does: the failure its Deployed condition reports.
func readDeployError(r *jsonReader) (string, error) {
	out := ""
	err := r.array(func() error {
		var typ, status, message string
		err := r.object(func(key []byte) error {
			var err error
			switch string(key) {
			case "type":
				typ, err = r.str()
			case "status":
				status, err = r.str()
			case "message":
				message, err = r.str()
			default:
				err = r.skip()
			}
			return err
		})
		if typ == "Deployed" {
			out = deployError(status, message)
		}
		return err
	})
	return out, err
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
	return c.rawRequest(BundleDeploymentGVR, "", opts)
}

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

// listBundleDeployments lists the BundleDeployments opts select in one
// request (no pages: opts.Limit and Continue are dropped), handing each to
// item as it is decoded; it returns the list's resourceVersion.
func (c *Client) listBundleDeployments(ctx context.Context, opts metav1.ListOptions, item func(bdItem)) (string, error) {
	opts.Limit, opts.Continue = 0, ""
	body, err := c.bdRequest(opts).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer body.Close()
	rv, err := decodeList(newJSONStream(body), func(v []byte) error {
		it, err := readBD(&jsonReader{data: v})
		if err == nil {
			item(it)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("decoding the list of bundledeployments: %w", err)
	}
	return rv, nil
}

// decodeList decodes a list one item at a time, handing each item's JSON
// (valid during the call) to item, and returns its resourceVersion.
func decodeList(s *jsonStream, item func([]byte) error) (rv string, err error) {
	if err := s.punct('{'); err != nil {
		return "", err
	}
	for {
		if c, err := s.peek(); err != nil || c == '}' {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return rv, err
		}
		k, err := s.value()
		if err != nil {
			return "", err
		}
		key, err := (&jsonReader{data: k}).str()
		if err != nil {
			return "", err
		}
		if err := s.punct(':'); err != nil {
			return "", err
		}
		switch key {
		case "items":
			if err := decodeItems(s, item); err != nil {
				return "", fmt.Errorf("items: %w", err)
			}
		case "metadata":
			v, err := s.value()
			if err != nil {
				return "", err
			}
			r := &jsonReader{data: v}
			rv = ""
			if err := r.object(func(key []byte) error {
				if string(key) == "resourceVersion" {
					rv, err = r.str()
					return err
				}
				return r.skip()
			}); err != nil {
				return "", fmt.Errorf("metadata: %w", err)
			}
		default:
			if _, err := s.value(); err != nil {
				return "", err
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

// bdEvent is one event of a watch of BundleDeployments.
type bdEvent struct {
	Type watch.EventType
	Item bdItem         // ADDED, MODIFIED, DELETED, BOOKMARK (its resourceVersion)
	Err  *metav1.Status // ERROR
}

// bdWatchDecoder decodes the events of a watch of BundleDeployments.
type bdWatchDecoder struct{ s *jsonStream }

// next returns the next event. Its errors are the stream's own, which
// the watch tells apart: io.EOF at its end (the API server closed it),
// io.ErrUnexpectedEOF or the connection's error when it was cut.
func (d *bdWatchDecoder) next() (bdEvent, error) {
	var ev bdEvent
	typ, err := decodeEvent(d.s, func(typ watch.EventType, r *jsonReader) error {
		if typ == watch.Error {
			ev.Err = &metav1.Status{}
			return readStatus(r, ev.Err)
		}
		var err error
		ev.Item, err = readBD(r)
		return err
	})
	ev.Type = typ
	return ev, err
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
