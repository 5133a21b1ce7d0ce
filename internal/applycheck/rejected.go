package applycheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/serverrules"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
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
	// Values says which values render the refused fields and, for an
	// update, how to keep their live values (inValues); "" when none
	// does.
	Values string

	// id and fields are the object and the refused fields (the server's
	// causes, as steps into it), with their live values, for Values.
	id     provenance.ObjectID
	fields []refusedField
	secret bool
}

// refusedField is a field of a server's refusal: its steps into the
// object and its live value (liveSet: the live object has it).
type refusedField struct {
	steps   []any
	live    any
	liveSet bool
}

// Verdict is a refusal, whoever applies.
func (r *Rejected) Verdict(Applier) (string, *values.Warning) { return r.String(), nil }

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
	if r.Values != "" {
		s += "; " + r.Values
	}
	return s
}

// judgeStored is the verdict on storing merged (the apply of o's object,
// merged with o.Live; the object itself for a create) under tc, the
// schema of its kind: nil when the server would store it.
func judgeStored(tc managedfields.TypeConverter, o liveobjects.Object, merged *unstructured.Unstructured) *Rejected {
	if o.Live == nil && tc != nil {
		if _, err := tc.ObjectToTyped(merged, typed.AllowDuplicates); err != nil {
			out := schemaRejected(o, err)
			return &out
		}
	}
	if err := serverrules.Validate(o.Live, merged); err != nil {
		return rejectedBy(o, merged, err)
	}
	return nil
}

// rejectedBy is the refusal of storing merged, o's object as the apply
// merges it, in the API server's words err: each cause's field read as
// steps into merged (for Values); a Secret's without its values.
func rejectedBy(o liveobjects.Object, merged *unstructured.Unstructured, err error) *Rejected {
	r := Rejected{Object: o.Name(), Update: o.Live != nil, Why: err.Error()}
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		var causes []string
		r.id, r.secret = provenance.ObjectID{Kind: merged.GetKind(), Namespace: merged.GetNamespace(), Name: merged.GetName()}, isSecret(merged)
		for _, c := range st.Status().Details.Causes {
			r.Immutable = r.Immutable || isImmutable(c.Message)
			if steps, ok := serverFieldSteps(c.Field); ok {
				r.fields = append(r.fields, refusedLeaves(o.Live, merged, steps)...)
			}
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

// maxRefusedLeaves is how many leaves of one refused field are read back.
const maxRefusedLeaves = 5

// refusedLeaves are the leaves of the refused field at steps of merged
// that an update changes (those live holds otherwise), or all of them for
// a create, each with its live value: a refused map (roleRef, a selector)
// is read back leaf by leaf.
func refusedLeaves(live, merged *unstructured.Unstructured, steps []any) []refusedField {
	v, ok := provenance.At(merged.Object, steps)
	if !ok {
		return nil
	}
	var out []refusedField
	var walk func(at []any, v any)
	walk = func(at []any, v any) {
		if len(out) == maxRefusedLeaves {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(append(at[:len(at):len(at)], k), x[k])
			}
			return
		case []any:
			for i, e := range x {
				walk(append(at[:len(at):len(at)], i), e)
			}
			return
		}
		f := refusedField{steps: at}
		if live != nil {
			f.live, f.liveSet = provenance.At(live.Object, at)
			if f.liveSet && values.Equal(f.live, v) {
				return // unchanged: not what is refused
			}
		}
		out = append(out, f)
	}
	walk(steps, v)
	return out
}

// serverFieldSteps are the steps of a field as the API server's
// validation names it (field.Path: spec.ports[1].name, metadata.labels[a.b/c]):
// names between dots, list indices and map keys in brackets.
func serverFieldSteps(path string) ([]any, bool) {
	var steps []any
	for path != "" {
		switch {
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil, false
			}
			key := path[1:end]
			if n, err := strconv.Atoi(key); err == nil {
				steps = append(steps, n)
			} else {
				steps = append(steps, key)
			}
			path = path[end+1:]
		case path[0] == '.':
			path = path[1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			steps = append(steps, path[:end])
			path = path[end:]
		}
	}
	return steps, len(steps) > 0
}

// rejectedInValues reads the refused fields of each rejection back in
// values terms (Rejected.Values) against trace: the values that render
// them, and how to keep the live values.
func rejectedInValues(rejected []*Rejected, trace *provenance.Map) {
	for _, r := range rejected {
		var says []string
		for _, f := range r.fields {
			read, _ := readField(trace, r.id, f.steps, f.live, f.liveSet, r.secret)
			if read.Mapped() {
				says = append(says, provenance.FieldString(f.steps)+": "+read.Says())
			}
		}
		r.Values = strings.Join(says, "; ")
	}
}
