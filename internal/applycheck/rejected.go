package applycheck

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/serverrules"
)

// This file is the check of what the API server would store: the object
// the apply sends, merged with the live one, validated as the server
// validates it (serverrules, for a built-in kind) and typed against the
// cluster's schema of its kind (a CRD's too). An object it would refuse
// fails the upgrade half-way: Helm has written the objects before it.

// Rejected is an object of the new chart the API server would refuse to
// store.
type Rejected struct {
	Object string // Kind namespace/name
	// Why is the server's own error (a Secret's without its values).
	Why string
	// Update: the object exists and the apply updates it; else it
	// creates it.
	Update bool
	// Immutable: the refusal is of a field the server does not let an
	// update change.
	Immutable bool
	// CRD names the resource whose schema refuses a custom resource
	// (widgets.example.com); "" for a built-in kind.
	CRD string
}

// String is the refusal: the object, the server's words, the way out.
func (r Rejected) String() string {
	write := "creating"
	if r.Update {
		write = "updating"
	}
	s := fmt.Sprintf("rejected by the API server: %s: %s; Helm's upgrade would fail %s it, after writing the objects before it", r.Object, r.Why, write)
	switch {
	case r.CRD != "":
		s += fmt.Sprintf("; the cluster's CustomResourceDefinition %s does not declare it: upgrade the CRD first "+
			"(the spec's apply.crds: createReplace does it from the chart's crds/; Helm, Fleet and klipper-helm do not upgrade them on an upgrade)", r.CRD)
	case r.Immutable:
		s += "; the ways out: keep the live value (adopt the value that renders it), or delete the object first " +
			"(with --cascade=orphan a workload's pods and claims stay) and let the upgrade create it"
	}
	return s
}

// judgeStored is the verdict on storing merged (the apply of o's object,
// merged with o.Live; the object itself for a create) under tc, the
// schema of its kind: nil when the server would store it.
func judgeStored(tc managedfields.TypeConverter, o liveobjects.Object, merged *unstructured.Unstructured) *Rejected {
	r := Rejected{Object: o.Name(), Update: o.Live != nil}
	if o.Live == nil && tc != nil {
		if _, err := tc.ObjectToTyped(merged, typed.AllowDuplicates); err != nil {
			out := schemaRejected(o, err)
			return &out
		}
	}
	err := serverrules.Validate(o.Live, merged)
	if err == nil {
		return nil
	}
	r.Why = err.Error()
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		var causes []string
		for _, c := range st.Status().Details.Causes {
			r.Immutable = r.Immutable || isImmutable(c.Message)
			if isSecret(merged) {
				causes = append(causes, fmt.Sprintf("%s: %s", c.Field, c.Type))
			}
		}
		if isSecret(merged) {
			r.Why = fmt.Sprintf("%s is invalid: %s (values %s)", o.Name(), strings.Join(causes, ", "), provenance.Redacted)
		}
	} else if isSecret(merged) {
		r.Why = "the server cannot decode it (values " + provenance.Redacted + ")"
	}
	return &r
}

// schemaRejected is the refusal of an apply the field manager could not
// type against the cluster's schema of its kind (a field the schema does
// not declare). A Secret's is not quoted: structured-merge-diff's words
// may hold the value it could not type.
func schemaRejected(o liveobjects.Object, err error) Rejected {
	why := err.Error()
	if isSecret(o.Want) {
		why = "the cluster's schema of Secret refuses it (values " + provenance.Redacted + ")"
	}
	return Rejected{Object: o.Name(), Why: why, Update: o.Live != nil, CRD: customResource(o)}
}

// customResource names the resource of o's kind (widgets.example.com)
// when it is not a built-in kind; "" for one.
func customResource(o liveobjects.Object) string {
	gvk := o.Want.GroupVersionKind()
	if o.Mapping == nil || scheme.Scheme.IsGroupRegistered(gvk.Group) {
		return ""
	}
	return o.Mapping.Resource.Resource + "." + gvk.Group
}

// immutableWords are how the API server's validation words a field an
// update may not change: "field is immutable", "updates to statefulset
// spec for fields other than … are forbidden", "cannot change roleRef",
// "may not change once set" (a Service's cluster IPs).
var immutableWords = []string{"immutable", "Forbidden: updates to", "cannot change", "may not change"}

func isImmutable(message string) bool {
	for _, w := range immutableWords {
		if strings.Contains(message, w) {
			return true
		}
	}
	return false
}

func isSecret(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().Group == "" && u.GetKind() == "Secret"
}
