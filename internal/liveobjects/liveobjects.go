// Package liveobjects reads the live copies of a chart's objects with as few
// requests as this process's RBAC allows: one list per resource and
// namespace where it may list and the manifest has two objects or more
// there, one get each otherwise. An object it may not read is named with
// the exact RBAC rule that would let it; nothing here ever writes.
package liveobjects

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Object is one object of the manifest and what the API server has of it.
type Object struct {
	// Want is the manifest's object, its namespace defaulted for a
	// namespaced kind and cleared for a cluster-scoped one.
	Want *unstructured.Unstructured
	// Mapping is its kind's resource; nil when the API server does not
	// serve the kind (a CRD the chart brings: the object is new), and
	// NoKind is then the mapper's answer.
	Mapping *meta.RESTMapping
	NoKind  error
	// Live is the object on the server; nil when there is none or it was
	// not read (Unread).
	Live *unstructured.Unstructured
	// Unread says why the object could not be read ("" when it was): a
	// refusal naming the rule to add.
	Unread string
}

// Name is the object for people: Kind namespace/name.
func (o Object) Name() string { return Describe(o.Want) }

// Describe names an object for people: Kind namespace/name.
func Describe(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return obj.GetKind() + " " + ns + "/" + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetName()
}

// Access says whether this process may do verbs on a resource in a
// namespace ("" for a cluster-scoped one).
type Access interface {
	May(ctx context.Context, resource schema.GroupVersionResource, namespace string, verbs ...string) (bool, error)
	// MayOn says whether it may do verb on the object name.
	MayOn(ctx context.Context, resource schema.GroupVersionResource, namespace, name, verb string) (bool, error)
}

// Reader reads from one API server.
type Reader struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// Access, when set, is asked before a list whether this process may
	// list; else a list is tried and a refusal falls back to gets.
	Access Access
	// Seen are objects a read moments ago found (Result.Seen), taken as
	// they are instead of read again; nil reads everything.
	Seen map[string]*unstructured.Unstructured
}

// Result is what Read found, in manifest order.
type Result struct {
	Objects []Object
	// Requests counts the API requests made (lists, gets and access
	// questions).
	Requests int
}

// Parallel is how many requests a fan-out of this program (the live
// objects' reads, the conflict check's applies) runs at once: enough to
// hide an API server's latency, few enough not to queue behind its
// max-in-flight limit (400 by default) on a busy cluster.
const Parallel = 8

// group is the objects of one resource in one namespace.
type group struct {
	gvr       schema.GroupVersionResource
	namespace string
	index     []int // into Result.Objects
}

// Read reads the live copy of each of objs (namespaced objects without a
// namespace are in namespace). An error of the API server other than "not
// found" and "forbidden" fails the read, naming the object.
func (r Reader) Read(ctx context.Context, objs []*unstructured.Unstructured, namespace string) (Result, error) {
	res := Result{Objects: make([]Object, len(objs))}
	groups := map[string]*group{}
	var order []string
	for i, u := range objs {
		u = u.DeepCopy()
		o := &res.Objects[i]
		o.Want = u
		gvk := u.GroupVersionKind()
		mapping, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			o.NoKind = err // a kind the chart brings: new
			continue
		}
		if err != nil {
			return res, fmt.Errorf("%s: %w", Describe(u), err)
		}
		o.Mapping = mapping
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(namespace)
			}
		} else {
			u.SetNamespace("")
		}
		if live, ok := r.Seen[seenKey(mapping.Resource, u)]; ok {
			o.Live = live
			continue
		}
		key := mapping.Resource.String() + "|" + u.GetNamespace()
		g := groups[key]
		if g == nil {
			g = &group{gvr: mapping.Resource, namespace: u.GetNamespace()}
			groups[key] = g
			order = append(order, key)
		}
		g.index = append(g.index, i)
	}
	// first one list per group that is worth one and allowed, then one get
	// for each object no list read: each step at most Parallel requests
	// at once
	var requests atomic.Int64
	listed := make([]bool, len(order))
	var lists errgroup.Group
	lists.SetLimit(Parallel)
	for n, key := range order {
		g := groups[key]
		lists.Go(func() error {
			ok, err := r.listGroup(ctx, g, res.Objects, &requests)
			listed[n] = ok
			return err
		})
	}
	if err := lists.Wait(); err != nil {
		res.Requests = int(requests.Load())
		return res, err
	}
	var gets errgroup.Group
	gets.SetLimit(Parallel)
	for n, key := range order {
		if listed[n] {
			continue
		}
		g := groups[key]
		client := r.client(g)
		for _, i := range g.index {
			gets.Go(func() error {
				o := &res.Objects[i]
				live, err := client.Get(ctx, o.Want.GetName(), metav1.GetOptions{})
				requests.Add(1)
				switch {
				case err == nil:
					o.Live = live
				case apierrors.IsNotFound(err):
				case apierrors.IsForbidden(err):
					o.Unread = "this process may not read it: " + Rule(g.gvr, g.namespace, o.Want.GetName(), "get")
				default:
					return fmt.Errorf("reading %s: %w", o.Name(), err)
				}
				return nil
			})
		}
	}
	err := gets.Wait()
	res.Requests = int(requests.Load())
	return res, err
}

// Seen is what res read, for a read moments later (Reader.Seen): each
// object read, live or found absent, by resource, namespace and name.
func (res Result) Seen() map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range res.Objects {
		if o.Mapping != nil && o.Unread == "" {
			out[seenKey(o.Mapping.Resource, o.Want)] = o.Live
		}
	}
	return out
}

func seenKey(gvr schema.GroupVersionResource, u *unstructured.Unstructured) string {
	return gvr.String() + "|" + u.GetNamespace() + "|" + u.GetName()
}

// secrets is the resource read by name only.
var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// listGroup reads one group's objects into objs with one list, when that
// is worth it (more than one object) and allowed; false when it did not
// (then each is read by its own get). Secrets are always read by name: a
// list would read every Secret of the namespace (Helm's release records,
// other programs' credentials) for a few.
func (r Reader) listGroup(ctx context.Context, g *group, objs []Object, requests *atomic.Int64) (bool, error) {
	if len(g.index) < 2 || g.gvr == secrets {
		return false, nil
	}
	if r.Access != nil {
		requests.Add(1)
		ok, err := r.Access.May(ctx, g.gvr, g.namespace, "list")
		if err != nil {
			return false, fmt.Errorf("asking whether this process may list %s%s: %w", g.gvr.GroupResource(), inNamespace(g.namespace), err)
		}
		if !ok {
			return false, nil
		}
	}
	requests.Add(1)
	list, err := r.client(g).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		byName := map[string]*unstructured.Unstructured{}
		for i := range list.Items {
			byName[list.Items[i].GetName()] = &list.Items[i]
		}
		for _, i := range g.index {
			objs[i].Live = byName[objs[i].Want.GetName()]
		}
		return true, nil
	case apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err):
		return false, nil // one get each
	default:
		return false, fmt.Errorf("listing %s%s: %w", g.gvr.GroupResource(), inNamespace(g.namespace), err)
	}
}

func (r Reader) client(g *group) dynamic.ResourceInterface {
	if g.namespace == "" {
		return r.Dynamic.Resource(g.gvr)
	}
	return r.Dynamic.Resource(g.gvr).Namespace(g.namespace)
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// Rule is the RBAC rule that lets this process do verb (get: read) on
// name (a resource of gvr in namespace; "" for a cluster-scoped one), in
// the words of a Role or ClusterRole: `chart-upgrader plan --check-rbac`
// prints all the reads of a chart.
func Rule(gvr schema.GroupVersionResource, namespace, name, verb string) string {
	where := "a ClusterRole"
	if namespace != "" {
		where = "a Role in namespace " + namespace
	}
	return fmt.Sprintf(`add to %s the rule {apiGroups: [%q], resources: [%s], resourceNames: [%s], verbs: [%s]}`,
		where, gvr.Group, gvr.Resource, name, verb)
}

// Unread names the objects of res that could not be read, with why, one
// per line, sorted.
func (res Result) Unread() []string {
	var out []string
	for _, o := range res.Objects {
		if o.Unread != "" {
			out = append(out, o.Name()+": "+o.Unread)
		}
	}
	sort.Strings(out)
	return out
}
