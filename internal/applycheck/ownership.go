package applycheck

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is who an object belongs to: Helm's ownership metadata, an
// object's identity across manifests, and the manager of its Apply entry.

// Helm's ownership metadata (helm.sh/helm/v4/pkg/action/validate.go).
const (
	managedByLabel      = "app.kubernetes.io/managed-by"
	managedByHelm       = "Helm"
	releaseNameKey      = "meta.helm.sh/release-name"
	releaseNamespaceKey = "meta.helm.sh/release-namespace"
)

// ownership is what obj lacks to be adopted by release name in namespace,
// in Helm's words; "" when nothing.
func ownership(obj *unstructured.Unstructured, name, namespace string) string {
	var why []string
	need := func(m map[string]string, what, k, v string) {
		actual, ok := m[k]
		switch {
		case !ok:
			why = append(why, fmt.Sprintf("%s %q missing: must be set to %q", what, k, v))
		case actual != v:
			why = append(why, fmt.Sprintf("%s %q must equal %q: current value is %q", what, k, v, actual))
		}
	}
	need(obj.GetLabels(), "label", managedByLabel, managedByHelm)
	need(obj.GetAnnotations(), "annotation", releaseNameKey, name)
	need(obj.GetAnnotations(), "annotation", releaseNamespaceKey, namespace)
	return strings.Join(why, "; ")
}

// setOwnership adds the metadata Helm sets on every object it applies.
func setOwnership(obj *unstructured.Unstructured, name, namespace string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[managedByLabel] = managedByHelm
	obj.SetLabels(labels)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[releaseNameKey], ann[releaseNamespaceKey] = name, namespace
	obj.SetAnnotations(ann)
}

// key is an object's identity as Helm compares a release's manifests:
// apiVersion, kind, namespace, name.
func key(obj *unstructured.Unstructured) string {
	return obj.GetAPIVersion() + "/" + obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// identity is an object's group, kind, namespace and name, a namespace
// left out put in namespace: the same object in two manifests, whatever
// version each names it at (a cluster-scoped object is named alike in
// both too, since both get the same namespace).
func identity(obj *unstructured.Unstructured, namespace string) string {
	ns := obj.GetNamespace()
	if ns == "" {
		ns = namespace
	}
	gvk := obj.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + ns + "/" + obj.GetName()
}

// keys are the identities of objs, a namespaced object without a
// namespace put in namespace.
func (c Checker) keys(objs []*unstructured.Unstructured, namespace string) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		out[key(c.placed(o, namespace))] = true
	}
	return out
}

// placed is a copy of obj where the cluster keeps it: a namespaced
// object without a namespace in namespace, a cluster-scoped one in none
// (as it is, for a kind the cluster does not serve).
func (c Checker) placed(obj *unstructured.Unstructured, namespace string) *unstructured.Unstructured {
	o := obj.DeepCopy()
	gvk := o.GroupVersionKind()
	if m, err := c.Reader.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		if m.Scope.Name() == meta.RESTScopeNameNamespace && o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		} else if m.Scope.Name() != meta.RESTScopeNameNamespace {
			o.SetNamespace("")
		}
	}
	return o
}

// ownerName is the bare manager name of an owner as the API server
// prints it: `"kubectl-set" using apps/v1` → kubectl-set.
func ownerName(owner string) string {
	if strings.HasPrefix(owner, `"`) {
		if end := strings.Index(owner[1:], `"`); end >= 0 {
			return owner[1 : end+1]
		}
	}
	return owner
}

// ApplyManager is the field manager that holds obj's Apply entry (of the
// object itself, not a subresource): the applier of its chart. With more
// than one, the one that owns the most fields. "" when none does.
func ApplyManager(obj *unstructured.Unstructured) string {
	best, size := "", -1
	for _, e := range obj.GetManagedFields() {
		if e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		n := 0
		if e.FieldsV1 != nil {
			n = len(e.FieldsV1.Raw)
		}
		if n > size {
			best, size = e.Manager, n
		}
	}
	return best
}

// adoptHint says how an operator lets Helm adopt an object: Helm's own
// ownership metadata, set with kubectl, or the object deleted.
func adoptHint(object string) string {
	return "to let the release adopt it, give it the label " + managedByLabel + "=" + managedByHelm +
		" and the annotations " + releaseNameKey + " and " + releaseNamespaceKey + " of the release (kubectl label and kubectl annotate " +
		object + "), or delete it"
}

// Verdict is a warning where a takes ownership (it adopts the object), a
// refusal naming what to add where it does not.
func (u Unowned) Verdict(a Applier) (string, *values.Warning) {
	if a.TakesOwnership {
		return "", &values.Warning{Kind: values.WarnTakeOwnership, Path: u.Object,
			Message: fmt.Sprintf("%s exists without this release's ownership metadata (%s); %s with takeOwnership and adopts it", u.Object, u.Why, a.Name)}
	}
	return fmt.Sprintf("ownership conflict: %s exists and cannot be imported into the release: invalid ownership metadata; %s; %s", u.Object, u.Why, adoptHint(u.Object)), nil
}
