package applycheck

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
)

// This file is the check of a custom resource's own validation: the API
// server validates a custom resource by its CRD's schema (types, enums,
// patterns, bounds, required fields, list-map keys) and its
// x-kubernetes-validations CEL rules, transition rules (oldSelf) of an
// update included, with ratcheting (an unchanged field that breaks a rule
// passes). The check runs the API server's own custom-resource strategy
// (apiextensions-apiserver's registry/customresource) on the object the
// apply would store and its live copy, with the schema the cluster
// publishes for the kind (OpenAPI v3, readable by everyone), or the
// schema of the chart's CRD the upgrade applies first (apply.crds).

func init() { objectChecks = append(objectChecks, customResourceCheck) }

// customResourceCheck is the API server's refusal of storing stored, a
// custom resource (a Rejected in its words, each refused field read back
// to its value), or nil: a built-in kind, or one the server would store.
func customResourceCheck(ctx context.Context, s Scope, o liveobjects.Object, stored *unstructured.Unstructured) Finding {
	gvk := stored.GroupVersionKind()
	if scheme.Scheme.IsGroupRegistered(gvk.Group) || gvk.Group == apiextv1.GroupName {
		return nil // a built-in kind: serverrules judges it
	}
	v, _ := s.Memo(gvk, func() any { return s.customResourceValidation(ctx, gvk, o.Mapping) }).(*crValidation)
	if v.err != nil {
		return Unchecked{Object: o.Name(), Why: v.err.Error()}
	}
	if v.strategy == nil {
		return nil
	}
	if v.namespaced && stored.GetNamespace() == "" {
		// a kind not served yet (its CRD is applied first): Helm puts the
		// object in the release's namespace, as the apply will
		stored = stored.DeepCopy()
		stored.SetNamespace(s.Request.Namespace)
	}
	var errs field.ErrorList
	if o.Live == nil {
		errs = v.strategy.Validate(ctx, stored)
	} else {
		errs = v.strategy.ValidateUpdate(ctx, stored, o.Live)
	}
	if len(errs) == 0 {
		return nil
	}
	return rejectedBy(o, stored, apierrors.NewInvalid(gvk.GroupKind(), stored.GetName(), errs))
}

// crValidation is how the API server validates one kind of custom
// resource: its strategy; nil strategy where the kind is not one (an
// aggregated API's); err where its schema could not be built.
type crValidation struct {
	strategy interface {
		Validate(ctx context.Context, obj runtime.Object) field.ErrorList
		ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	}
	namespaced bool
	err        error
}

// customResourceValidation builds the strategy of gvk: from the schema of
// a CRD the upgrade applies first (Schemas.Replace, apply.crds) that
// defines it, else from the schema the cluster publishes (mapping says its
// scope; nil: not served yet).
func (s Scope) customResourceValidation(ctx context.Context, gvk schema.GroupVersionKind, mapping *meta.RESTMapping) *crValidation {
	own, found := s.Checker.Schemas.owned(gvk)
	props, namespaced := own.schema, own.namespaced
	if !found || props == nil {
		if mapping == nil || s.Checker.Schemas == nil {
			return &crValidation{}
		}
		namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
		d := s.Checker.Schemas.doc(ctx, gvk.GroupVersion())
		if d.err != nil {
			return &crValidation{} // the schema check names the object not checked
		}
		var err error
		if props, err = publishedSchema(d.raw[d.byKind[gvk.Kind]]); props == nil || err != nil {
			return &crValidation{err: err}
		}
	}
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		return &crValidation{err: fmt.Errorf("the schema of %s: %w", gvk, err)}
	}
	validator, _, err := validation.NewSchemaValidator(props)
	if err != nil {
		return &crValidation{err: fmt.Errorf("the schema of %s: %w", gvk, err)}
	}
	strategy := customresource.NewStrategy(unstructuredscheme.NewUnstructuredObjectTyper(), namespaced, gvk, validator, nil, structural, nil, nil, nil)
	return &crValidation{strategy: strategy, namespaced: namespaced}
}

// publishedSchema is the schema of a custom resource's kind as the
// cluster publishes it in OpenAPI v3, back in the CRD's terms: less the
// properties the API server adds (apiVersion, kind, and metadata, a
// reference to ObjectMeta). nil when the kind is not a custom resource's
// (its schema refers to others).
func publishedSchema(raw json.RawMessage) (*apiextensions.JSONSchemaProps, error) {
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, err
	}
	if props, ok := root["properties"].(map[string]any); ok {
		delete(props, "metadata")
		delete(props, "apiVersion")
		delete(props, "kind")
	}
	data, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(data), `"$ref"`) {
		return nil, nil // an aggregated API's kind, not a custom resource
	}
	v1 := &apiextv1.JSONSchemaProps{}
	if err := json.Unmarshal(data, v1); err != nil {
		return nil, err
	}
	return internalSchema(v1)
}

// internalSchema is v1 converted to the API server's internal form.
func internalSchema(v1 *apiextv1.JSONSchemaProps) (*apiextensions.JSONSchemaProps, error) {
	out := &apiextensions.JSONSchemaProps{}
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
