package fleetsim

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// freshCache remembers the objects the simulator wrote last. The informer
// caches lag behind its own writes; reading them alone would make it write
// again from stale copies (conflicts, "already exists") and back off.
type freshCache struct {
	mu   sync.Mutex
	objs map[schema.GroupVersionResource]map[string]*unstructured.Unstructured
}

func newFreshCache() *freshCache {
	return &freshCache{objs: map[schema.GroupVersionResource]map[string]*unstructured.Unstructured{}}
}

// wrote records the API server's answer to a write.
func (c *freshCache) wrote(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.objs[gvr]
	if m == nil {
		m = map[string]*unstructured.Unstructured{}
		c.objs[gvr] = m
	}
	m[key(u.GetNamespace(), u.GetName())] = u
}

// forget drops what is known of a deleted object.
func (c *freshCache) forget(gvr schema.GroupVersionResource, k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.objs[gvr], k)
}

// get returns the newer of the informer's copy and the last write, by
// resourceVersion (etcd revisions, so numbers), or false when neither has
// the object. The result is shared: callers must not modify it.
func (c *freshCache) get(gvr schema.GroupVersionResource, inf cache.SharedIndexInformer, k string) (*unstructured.Unstructured, bool) {
	var cached *unstructured.Unstructured
	if obj, ok, err := inf.GetIndexer().GetByKey(k); err == nil && ok {
		cached = obj.(*unstructured.Unstructured)
	}
	return c.pick(gvr, k, cached)
}

func (c *freshCache) pick(gvr schema.GroupVersionResource, k string, cached *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mine := c.objs[gvr][k]
	switch {
	case mine == nil:
		return cached, cached != nil
	case cached == nil:
		return mine, true
	case rv(cached) >= rv(mine):
		delete(c.objs[gvr], k) // the informer caught up
		return cached, true
	default:
		return mine, true
	}
}

func rv(u *unstructured.Unstructured) uint64 {
	n, _ := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	return n
}
