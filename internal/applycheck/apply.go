package applycheck

import (
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// This file is the apply itself: the API server's field manager run in
// this process over a live object and the object the chart renders.

// applyConflicts runs, in this process, the server-side apply (without
// force) of want over live as manager, as the API server runs it: the
// same field manager of k8s.io/apimachinery over tc, the type converter of
// the cluster's schema for the kind, and reset, the fields its
// reset-fields strategy drops from such a write (Schemas.ResetFields). It
// returns the conflicts as the API server reports them (the causes of its
// 409), and the object the apply stores (with force when there are
// conflicts: what a forced or client-side apply stores); an error when
// the apply fails for another reason (the schema refuses want, say).
func applyConflicts(tc managedfields.TypeConverter, reset map[fieldpath.APIVersion]fieldpath.Filter, live, want *unstructured.Unstructured, manager string) ([]metav1.StatusCause, *unstructured.Unstructured, error) {
	gvk := want.GroupVersionKind()
	fm, err := managedfields.NewDefaultFieldManager(tc, sameVersion{gvk.GroupVersion()}, noDefaults{}, creater{}, gvk, gvk.GroupVersion(), "", reset)
	if err != nil {
		return nil, nil, err
	}
	applied, err := asDecoded(want)
	if err != nil {
		return nil, nil, err
	}
	applied.SetManagedFields(nil)
	stored, err := fm.Apply(live.DeepCopy(), applied, manager, false)
	if err == nil {
		return nil, stored.(*unstructured.Unstructured), nil
	}
	causes := conflictCauses(err)
	if causes == nil {
		return nil, nil, err
	}
	if stored, err = fm.Apply(live.DeepCopy(), applied.DeepCopy(), manager, true); err != nil {
		return nil, nil, err
	}
	return causes, stored.(*unstructured.Unstructured), nil
}

// fieldSet is obj as the API server decodes it (asDecoded), and the
// fields it sets, as tc types them.
func fieldSet(tc managedfields.TypeConverter, obj *unstructured.Unstructured) (*unstructured.Unstructured, *fieldpath.Set, error) {
	decoded, err := asDecoded(obj)
	if err != nil {
		return nil, nil, err
	}
	tv, err := tc.ObjectToTyped(decoded, typed.AllowDuplicates)
	if err != nil {
		return nil, nil, fmt.Errorf("typing the object: %w", err)
	}
	set, err := tv.ToFieldSet()
	return decoded, set, err
}

// asDecoded is obj as the API server decodes a request body: integers as
// int64 (a YAML decoder gives float64).
func asDecoded(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	out, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	return out.(*unstructured.Unstructured), nil
}

// sameVersion converts nothing: the object and its managers are at the
// version applied. A manager recorded at another version is one only the
// API server could convert to, so the field manager drops it, as the API
// server drops a version it no longer serves.
type sameVersion struct{ gv schema.GroupVersion }

func (c sameVersion) Convert(in, out, context any) error {
	return errors.New("applycheck: no conversion")
}

func (c sameVersion) ConvertToVersion(in kruntime.Object, target kruntime.GroupVersioner) (kruntime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	if want, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk}); ok && want == gvk {
		return in, nil
	}
	return nil, kruntime.NewNotRegisteredGVKErrForTarget("applycheck", gvk, target)
}

func (c sameVersion) ConvertFieldLabel(schema.GroupVersionKind, string, string) (string, string, error) {
	return "", "", errors.New("applycheck: no field labels")
}

type noDefaults struct{}

func (noDefaults) Default(kruntime.Object) {}

type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (kruntime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// fieldPaths are the structured paths of the fields obj sets, as tc
// types them, by the way the API server prints them in a conflict.
func fieldPaths(tc managedfields.TypeConverter, obj *unstructured.Unstructured) (map[string]fieldpath.Path, error) {
	_, set, err := fieldSet(tc, obj)
	if err != nil {
		return nil, err
	}
	out := map[string]fieldpath.Path{}
	set.Iterate(func(fp fieldpath.Path) { out[fp.String()] = fp.Copy() })
	return out, nil
}

// conflictCauses are the field-manager conflicts of a failed apply; nil
// when it failed for another reason.
func conflictCauses(err error) []metav1.StatusCause {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != 409 || st.Status().Details == nil {
		return nil
	}
	var out []metav1.StatusCause
	for _, c := range st.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			out = append(out, c)
		}
	}
	return out
}
