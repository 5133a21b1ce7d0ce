package crds

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objects counts live's objects at its storage version, naming the first
// few (namespace/name).
func (c *Client) objects(ctx context.Context, live *apiextv1.CustomResourceDefinition) (Objects, error) {
	v := storage(live)
	for _, ver := range live.Spec.Versions { // a served one to list at
		if ver.Served {
			v = ver.Name
			if ver.Storage {
				break
			}
		}
	}
	gvr := schema.GroupVersionResource{Group: live.Spec.Group, Version: v, Resource: live.Spec.Names.Plural}
	var o Objects
	err := c.eachObject(ctx, gvr, func(item *unstructured.Unstructured) error {
		o.Count++
		if len(o.First) < firstNamed {
			o.First = append(o.First, objectName(item))
		}
		return nil
	})
	return o, err
}

// eachObject calls fn with each object of gvr, in all namespaces, read
// in pages of 500; it stops at fn's first error.
func (c *Client) eachObject(ctx context.Context, gvr schema.GroupVersionResource, fn func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.Dynamic.Resource(gvr).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			if err := fn(&list.Items[i]); err != nil {
				return err
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// pruned reads the objects of live at a version both live and crd serve
// (crd's storage version when it can) and types each by crd's schema of
// that version as the API server's pruning does: the fields it would drop
// on the object's next write, counted and the first few named. Nothing
// when no version is served by both, or crd keeps unknown fields.
func (c *Client) pruned(ctx context.Context, crd CRD, live *apiextv1.CustomResourceDefinition) (Pruned, string, error) {
	var at *apiextv1.CustomResourceDefinitionVersion
	for i := range crd.Typed.Spec.Versions {
		v := &crd.Typed.Spec.Versions[i]
		if was := version(live, v.Name); v.Served && was != nil && was.Served && (at == nil || v.Storage) {
			at = v
		}
	}
	if at == nil || at.Schema == nil || at.Schema.OpenAPIV3Schema == nil || crd.Typed.Spec.PreserveUnknownFields {
		return Pruned{}, "", nil
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(at.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return Pruned{}, "", err
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return Pruned{}, "", fmt.Errorf("the new schema at %s: %w", at.Name, err)
	}
	gvr := schema.GroupVersionResource{Group: crd.Typed.Spec.Group, Version: at.Name, Resource: crd.Typed.Spec.Names.Plural}
	var out Pruned
	err = c.eachObject(ctx, gvr, func(item *unstructured.Unstructured) error {
		paths := pruning.PruneWithOptions(item.DeepCopy().Object, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		if len(paths) == 0 {
			return nil
		}
		out.Count++
		if len(out.First) < firstNamed {
			for i := range paths {
				paths[i] = "." + paths[i]
			}
			out.First = append(out.First, fmt.Sprintf("%s %s: %s", item.GetKind(), objectName(item), strings.Join(paths, ", ")))
		}
		return nil
	})
	if err != nil {
		return Pruned{}, "", err
	}
	return out, at.Name, nil
}
