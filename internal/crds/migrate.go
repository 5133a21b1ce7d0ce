package crds

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// intermediate is crd with the versions live stores objects at that crd
// drops or stops serving put back, served and not the storage version:
// what a migration applies first, so that every object stays readable
// while it is written back at crd's storage version. ok is false when
// nothing is to be put back.
func intermediate(crd CRD, live *apiextv1.CustomResourceDefinition) (CRD, bool) {
	typed := crd.Typed.DeepCopy()
	changed := false
	for _, v := range live.Status.StoredVersions {
		switch now := version(typed, v); {
		case now == nil:
			was := version(live, v)
			if was == nil {
				continue
			}
			back := *was.DeepCopy()
			back.Served, back.Storage = true, false
			typed.Spec.Versions = append(typed.Spec.Versions, back)
			changed = true
		case !now.Served:
			now.Served = true
			changed = true
		}
	}
	if !changed {
		return crd, false
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return crd, false
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return CRD{From: crd.From, Object: u, Typed: typed}, true
}

// migrate moves the objects of crd off the versions d.Migrate names, as
// kube-storage-version-migrator and clusterctl do: it applies the
// intermediate CRD (the old versions kept and served, the new storage
// version), writes every object back unchanged (the API server stores it
// at the new storage version), then trims status.storedVersions to that
// version. Each step may be repeated: a run killed in the middle
// converges when run again.
func (c *Client) migrate(ctx context.Context, crd CRD, d Decision) error {
	u, err := c.Dynamic.Resource(GVR).Get(ctx, crd.Name(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	live := &apiextv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live); err != nil {
		return err
	}
	if inter, ok := intermediate(crd, live); ok {
		if _, err := c.apply(ctx, inter, d.Manager, false, false); err != nil {
			return fmt.Errorf("applying it with %s kept: %s", strings.Join(d.Migrate, ", "), refusal(err, crd.Name(), d.Manager))
		}
		if err := c.ready(ctx, inter); err != nil {
			return err
		}
	}
	to := storage(crd.Typed)
	gvr := schema.GroupVersionResource{Group: crd.Typed.Spec.Group, Version: to, Resource: crd.Typed.Spec.Names.Plural}
	start, last := time.Now(), time.Now()
	done := 0
	err = c.eachObject(ctx, gvr, func(item *unstructured.Unstructured) error {
		if err := c.writeBack(ctx, gvr, item); err != nil {
			return err
		}
		done++
		if c.Progress != nil {
			c.Progress(crd.Name(), done)
		}
		if time.Since(last) >= 2*time.Second {
			c.log().Info("migrating the CRD's objects", "crd", crd.Name(), "to", to, "written", done, "elapsed", time.Since(start).Round(time.Second).String())
			last = time.Now()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing its objects back at %s: %w", to, err)
	}
	c.log().Info("the CRD's objects migrated", "crd", crd.Name(), "to", to, "written", done, "elapsed", time.Since(start).Round(time.Millisecond).String())
	return c.trimStored(ctx, crd.Name(), to)
}

// writeBack writes obj back as it is, once more after a conflict with
// the object read again; an object deleted meanwhile needs nothing.
func (c *Client) writeBack(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	ri := c.Dynamic.Resource(gvr).Namespace(obj.GetNamespace())
	for attempt := 0; ; attempt++ {
		_, err := ri.Update(ctx, obj, metav1.UpdateOptions{FieldManager: Manager})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < 3:
			if obj, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
		default:
			return fmt.Errorf("writing back %s: %w", objectName(obj), err)
		}
	}
}

// trimStored sets the CRD's status.storedVersions to to alone: every
// object is stored there now.
func (c *Client) trimStored(ctx context.Context, name, to string) error {
	u, err := c.Dynamic.Resource(GVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if stored, _, _ := unstructured.NestedStringSlice(u.Object, "status", "storedVersions"); slices.Equal(stored, []string{to}) {
		return nil
	}
	if err := unstructured.SetNestedStringSlice(u.Object, []string{to}, "status", "storedVersions"); err != nil {
		return err
	}
	if _, err := c.Dynamic.Resource(GVR).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: Manager}); err != nil {
		return fmt.Errorf("trimming status.storedVersions to [%s]: %w", to, err)
	}
	c.log().Info("CRD status.storedVersions trimmed", "crd", name, "to", to)
	return nil
}
