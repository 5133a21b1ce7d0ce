package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Live reads the source objects of live and once rules. A missing object
// (or a kind the cluster does not serve) is left out: the merge reports it.
// One this process may not read is an *upgrade.ForbiddenSource naming the
// RBAC rule that lets it.
func (c *Cluster) Live(ctx context.Context, refs []values.ObjectRef) (values.LiveObjects, error) {
	live := values.LiveObjects{}
	for _, ref := range refs {
		if _, ok := live.Get(ref); ok {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("live source %s: %w", ref, err)
		}
		mapping, err := c.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
		if meta.IsNoMatchError(err) {
			c.Log.Warn("live source kind is not served by the cluster", "source", ref.String())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("live source %s: %w", ref, err)
		}
		res := c.Dynamic.Resource(mapping.Resource)
		var u *unstructured.Unstructured
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			u, err = res.Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		} else {
			u, err = res.Get(ctx, ref.Name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if apierrors.IsForbidden(err) {
			ns := ""
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				ns = ref.Namespace
			}
			return nil, &upgrade.ForbiddenSource{Ref: ref, Grant: liveobjects.Rule(mapping.Resource, ns, ref.Name, "get"), Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("reading live source %s: %w", ref, err)
		}
		if err := live.Add(u.Object); err != nil {
			return nil, fmt.Errorf("live source %s: %w", ref, err)
		}
	}
	return live, nil
}
