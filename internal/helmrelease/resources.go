package helmrelease

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/chart-upgrader/chart-upgrader/internal/apimap"
	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
)

// Resources is the readiness of a release revision's objects.
type Resources struct {
	Revision int // the release revision they belong to
	Ready    int
	Total    int
	NotReady []string // one line per object, naming it and why
	Failed   []string // objects their controllers report failed
	// Objects are the objects that are not ready, as kstatus judged them
	// (NotReady's lines, structured).
	Objects []ObjectStatus
}

// ObjectStatus is kstatus's judgement of one object that is not ready.
type ObjectStatus struct {
	APIVersion, Kind, Namespace, Name string
	Status                            string // InProgress, Failed, NotFound, …
	Message                           string
}

// manifestObject is one object of a release's manifest.
type manifestObject struct {
	u *unstructured.Unstructured
}

func (m manifestObject) String() string { return liveobjects.Describe(m.u) }

// manifestObjects are the objects of a release's manifest, their
// namespace defaulted to the release's (Helm's releaseutil split).
func manifestObjects(rel *release.Release) ([]manifestObject, error) {
	objs, err := manifest.Objects(rel.Manifest)
	if err != nil {
		return nil, fmt.Errorf("helm release %s/%s revision %d: manifest: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	out := make([]manifestObject, 0, len(objs))
	for _, u := range objs {
		out = append(out, manifestObject{u: u})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// Client reads releases and their objects.
type Client struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Log receives what the watches have to say; nil discards it.
	Log *slog.Logger
	// RESTMapper, when set, is the run's mapper (its discovery read once
	// for the run); else the Client makes its own.
	RESTMapper meta.RESTMapper

	mapperOnce sync.Once
	restMapper meta.RESTMapper
	accessOnce sync.Once
	selfAccess *liveobjects.SelfAccess

	seenMu sync.Mutex
	seen   map[string]*unstructured.Unstructured
}

// TakeSeen is what the last Look read, once: preflight's conflict check,
// right after the readiness check, takes those objects instead of
// reading them again; nil when nothing was read since.
func (c *Client) TakeSeen() map[string]*unstructured.Unstructured {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	out := c.seen
	c.seen = nil
	return out
}

// Mapper maps kinds to resources through the API server's discovery,
// cached for the Client.
func (c *Client) Mapper() meta.RESTMapper {
	c.mapperOnce.Do(func() {
		c.restMapper = c.RESTMapper
		if c.restMapper == nil {
			c.restMapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
		}
	})
	return c.restMapper
}

// Look judges the objects of a release revision by kstatus, read by kind
// and namespace (liveobjects: one list where allowed, else one get each):
// Current is ready; InProgress, Terminating, NotFound and Unknown are not
// ready, Failed is a failure.
func (c *Client) Look(ctx context.Context, rel *release.Release) (*Resources, error) {
	objs, err := manifestObjects(rel)
	if err != nil {
		return nil, err
	}
	res := &Resources{Revision: rel.Version, Total: len(objs)}
	us := make([]*unstructured.Unstructured, len(objs))
	for i, m := range objs {
		us[i] = servedVersion(m.u, c.Mapper())
	}
	read, err := liveobjects.Reader{Dynamic: c.Dynamic, Mapper: c.Mapper(), Access: c.Access()}.Read(ctx, us, rel.Namespace)
	if err != nil {
		return nil, fmt.Errorf("reading the objects of helm release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	c.seenMu.Lock()
	c.seen = read.Seen()
	c.seenMu.Unlock()
	for i, o := range read.Objects {
		m := objs[i] // named as the manifest names it
		switch {
		case o.Mapping == nil:
			res.NotReady = append(res.NotReady, fmt.Sprintf("%s: kind unknown to the API server: %v", m, o.NoKind))
		case o.Unread != "":
			return nil, fmt.Errorf("reading %s of helm release %s/%s: %s", m, rel.Namespace, rel.Name, o.Unread)
		case o.Live == nil:
			res.NotReady = append(res.NotReady, fmt.Sprintf("%s: not found", m))
			res.Objects = append(res.Objects, ObjectStatus{APIVersion: o.Want.GetAPIVersion(), Kind: o.Want.GetKind(), Namespace: o.Want.GetNamespace(),
				Name: o.Want.GetName(), Status: "NotFound", Message: "not found"})
		default:
			judgeObject(res, o.Live)
		}
	}
	return res, nil
}

// servedVersion is u, or, when the cluster no longer serves its version
// (a revision stored before the cluster's upgrade: policy/v1beta1), a
// copy at the version that replaces it (apimap.Replacement): the API
// server serves the same object there.
func servedVersion(u *unstructured.Unstructured, mapper meta.RESTMapper) *unstructured.Unstructured {
	gvk := u.GroupVersionKind()
	to, ok := apimap.ServedAs(gvk, mapper)
	if !ok || to == gvk {
		return u
	}
	out := u.DeepCopy()
	out.SetAPIVersion(to.GroupVersion().String())
	out.SetKind(to.Kind)
	return out
}

// Access asks the API server, once per question for the Client, whether
// this process may do a verb: the readiness check and the conflict check
// of a run share its answers.
func (c *Client) Access() liveobjects.Access {
	c.accessOnce.Do(func() { c.selfAccess = &liveobjects.SelfAccess{Kube: c.Kube} })
	return c.selfAccess
}

// judgeObject adds the kstatus judgement of one live object to res.
func judgeObject(res *Resources, live *unstructured.Unstructured) {
	name := manifestObject{u: live}.String()
	st, err := status.Compute(live)
	obj := ObjectStatus{APIVersion: live.GetAPIVersion(), Kind: live.GetKind(), Namespace: live.GetNamespace(), Name: live.GetName()}
	switch {
	case err != nil:
		res.NotReady = append(res.NotReady, fmt.Sprintf("%s: %v", name, err))
		obj.Status, obj.Message = "Unknown", err.Error()
	case st.Status == status.CurrentStatus:
		res.Ready++
		return
	case st.Status == status.FailedStatus:
		res.Failed = append(res.Failed, fmt.Sprintf("%s: %s", name, st.Message))
		res.NotReady = append(res.NotReady, fmt.Sprintf("%s: Failed: %s", name, st.Message))
		obj.Status, obj.Message = st.Status.String(), st.Message
	default:
		res.NotReady = append(res.NotReady, fmt.Sprintf("%s: %s: %s", name, st.Status, st.Message))
		obj.Status, obj.Message = st.Status.String(), st.Message
	}
	res.Objects = append(res.Objects, obj)
}
