// Package applycheck finds, before anything is written, the field-manager
// conflicts a server-side apply of a chart's objects would meet, and the
// objects Helm would refuse to adopt. It reads each live object (with its
// managedFields) and the cluster's OpenAPI v3 schema of its kind, and runs
// the apply the API server would run, with the same library
// (k8s.io/apimachinery's managedfields, on structured-merge-diff), in this
// process: no dry run, so it needs only read access to the chart's
// objects (docs/design.md §7). It reads the live value of each conflicting
// field and the value the chart would set, for the report (redacted in a
// Secret).
package applycheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/values"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"
)

// Conflict is one field of a live object that another manager owns and
// the apply would set to another value.
type Conflict struct {
	Object string // "Deployment demo/app-web" (kind namespace/name)
	Field  string // the field path, as the API server prints it
	// Owner is the manager that owns the field, as the API server names
	// it (`"kubectl-set" using apps/v1`); OwnerName is its bare name.
	Owner, OwnerName string
	Live, New        string // the values, for people; redacted in a Secret
	// Secret: the object is a Secret (Live and New are redacted).
	Secret bool
	// AppliedAs is the field manager the object was applied as.
	AppliedAs string
	// Unchanged: Request.Old sets the field to the value the upgrade sets
	// (the chart does not change it): a client-side three-way merge leaves
	// the live value alone.
	Unchanged bool
	// Values says which values render the field and how to keep its live
	// value, or why it cannot be adopted ("" without Request.Trace).
	Values string

	// the object applied, where the field is in it, and its live value,
	// to read it back in values terms
	id      provenance.ObjectID
	steps   []any
	live    any
	liveSet bool
}

// String is the conflict in one line: object, field, owner, values (cut
// to MaxShown each).
func (c Conflict) String() string {
	return fmt.Sprintf("%s %s is owned by %s (live: %s; the upgrade sets: %s)", c.Object, c.Field, c.Owner, Clip(c.Live), Clip(c.New))
}

// Unowned is an object the new chart adds that exists already without
// this release's ownership metadata: Helm refuses to adopt it ("invalid
// ownership metadata") unless it takes ownership.
type Unowned struct {
	Object string
	Why    string // what the ownership metadata lacks, as Helm says it
}

// Request is what to check.
type Request struct {
	// Manifest is the chart's objects, one YAML stream.
	Manifest string
	// Namespace is the namespace of namespaced objects that name none
	// (the release's).
	Namespace string
	// Release is the release's name: the ownership metadata Helm adds to
	// every object (and requires of an object it adopts); "" checks no
	// ownership.
	Release string
	// Manager is the field manager to apply as; "" to take, per object,
	// the one that holds its Apply entry (ApplyManager), else Fallback.
	Manager, Fallback string
	// Old is the manifest deployed now ("": unknown), to tell the fields
	// the chart changes from those it does not (Conflict.Unchanged), and
	// the objects the upgrade adds (Unowned).
	Old string
	// Trace gives Manifest's provenance, called only when there is a
	// conflict: each is then read back in values terms (Conflict.Values);
	// nil to leave that out.
	Trace func() (*provenance.Map, error)
}

// Result is what the check found.
type Result struct {
	Conflicts []Conflict
	Unowned   []Unowned
	// Checked counts the objects that exist and were checked; Requests
	// the API requests made (reads, access questions, schemas).
	Checked, Requests int
	// NotChecked names each object that exists, or may, and was not
	// checked, with the reason (unreadable: the rule to add; no schema).
	NotChecked []string
	// Managers are the field managers applied as, by name.
	Managers []string
}

// Checker checks against one API server.
type Checker struct {
	Reader  liveobjects.Reader
	Schemas *Schemas
}

// Check reads the live copy of each object of r.Manifest and computes the
// conflicts of its apply, in manifest order. An object of a kind the
// cluster does not serve yet (a CRD the chart brings) or that does not
// exist is new: it cannot conflict. It writes nothing.
func (c Checker) Check(ctx context.Context, r Request) (Result, error) {
	objs, err := Objects(r.Manifest)
	if err != nil {
		return Result{}, fmt.Errorf("reading the rendered manifest: %w", err)
	}
	old := map[string]map[string]any{} // by group, kind, namespace and name (identity)
	var olds []*unstructured.Unstructured
	if r.Old != "" {
		if olds, err = Objects(r.Old); err != nil {
			return Result{}, fmt.Errorf("reading the deployed manifest: %w", err)
		}
		for _, o := range olds {
			old[identity(o, r.Namespace)] = o.Object
		}
	}
	read, err := c.Reader.Read(ctx, objs, r.Namespace)
	if err != nil {
		return Result{}, err
	}
	res := Result{Requests: read.Requests}
	deployed := c.keys(olds, r.Namespace)

	type answer struct {
		conflicts []Conflict
		reason    string
		manager   string
	}
	answers := make([]answer, len(read.Objects))
	c.Schemas.prefetch(ctx, read.Objects)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, o := range read.Objects {
		if o.Unread != "" {
			answers[i].reason = o.Unread
			continue
		}
		if o.Live == nil {
			continue
		}
		if r.Release != "" && r.Old != "" && !deployed[key(o.Want)] {
			if why := ownership(o.Live, r.Release, r.Namespace); why != "" {
				res.Unowned = append(res.Unowned, Unowned{Object: o.Name(), Why: why})
			}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			a := &answers[i]
			a.manager = r.Manager
			if a.manager == "" {
				if a.manager = ApplyManager(o.Live); a.manager == "" {
					a.manager = r.Fallback
				}
			}
			want := o.Want.DeepCopy()
			if r.Release != "" {
				setOwnership(want, r.Release, r.Namespace)
			}
			a.conflicts, a.reason = c.one(ctx, o, want, a.manager, old[identity(o.Want, r.Namespace)])
		}()
	}
	wg.Wait()
	managers := map[string]bool{}
	for i, a := range answers {
		res.Conflicts = append(res.Conflicts, a.conflicts...)
		switch {
		case a.reason != "":
			res.NotChecked = append(res.NotChecked, read.Objects[i].Name()+": "+a.reason)
		case a.manager != "":
			res.Checked++
			managers[a.manager] = true
		}
	}
	for m := range managers {
		res.Managers = append(res.Managers, m)
	}
	if err := inValues(res.Conflicts, r.Trace); err != nil {
		return Result{}, err
	}
	sort.Strings(res.Managers)
	if c.Schemas != nil {
		res.Requests += c.Schemas.fetched()
	}
	return res, nil
}

// one computes the conflicts of applying want over o.Live as manager; a
// reason when it cannot (no schema for the kind; an object its schema
// refuses, which the apply itself will meet and name). The fields the API
// server resets on such a write (a status) are left out, as it leaves
// them out.
func (c Checker) one(ctx context.Context, o liveobjects.Object, want *unstructured.Unstructured, manager string, old map[string]any) ([]Conflict, string) {
	gvk := want.GroupVersionKind()
	tc, err := c.Schemas.Converter(ctx, gvk)
	if err != nil {
		return nil, err.Error()
	}
	causes, err := ApplyConflicts(tc, c.Schemas.ResetFields(ctx, gvk), o.Live, want, manager)
	if err != nil {
		return nil, err.Error()
	}
	if len(causes) == 0 {
		return nil, ""
	}
	// each conflict's field by its structured path in want's field set:
	// the printed one cannot be parsed back when a key holds a dot
	paths, err := fieldPaths(tc, want)
	if err != nil {
		return nil, err.Error()
	}
	secret := gvk.Group == "" && gvk.Kind == "Secret"
	var out []Conflict
	for _, cause := range causes {
		owner := strings.TrimPrefix(cause.Message, "conflict with ")
		k := Conflict{Object: o.Name(), Field: cause.Field, Owner: owner, OwnerName: ownerName(owner), Secret: secret, AppliedAs: manager}
		if fp, ok := paths[cause.Field]; ok {
			path := pathOf(fp)
			live, liveSet := path.Lookup(o.Live.Object)
			k.Live, k.New = show(live, liveSet), show(path.Lookup(want.Object))
			if old != nil {
				ov, ook := path.Lookup(old)
				nv, nok := path.Lookup(want.Object)
				k.Unchanged = ook == nok && sameValue(ov, nv)
			}
			k.id = provenance.ObjectID{Kind: want.GetKind(), Namespace: want.GetNamespace(), Name: want.GetName()}
			k.steps, _ = path.Steps(want.Object)
			k.live, k.liveSet = live, liveSet
		} else {
			k.Live, k.New = "(unread)", "(unread)"
		}
		if secret {
			k.Live, k.New = provenance.Redacted, provenance.Redacted
		}
		out = append(out, k)
	}
	return out, ""
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

// inValues reads each conflict back in values terms (Conflict.Values)
// against the provenance traceOf gives, asked once when there is a
// conflict.
func inValues(conflicts []Conflict, traceOf func() (*provenance.Map, error)) error {
	if len(conflicts) == 0 || traceOf == nil {
		return nil
	}
	trace, err := traceOf()
	if err != nil || trace == nil {
		return err
	}
	for i := range conflicts {
		k := &conflicts[i]
		if k.steps == nil {
			continue // its path did not parse
		}
		read, _ := readField(trace, k.id, k.steps, k.live, k.liveSet, k.Secret)
		k.Values = read.Says()
	}
	return nil
}

// ApplyConflicts runs, in this process, the server-side apply (without
// force) of want over live as manager, as the API server runs it: the
// same field manager of k8s.io/apimachinery over tc, the type converter of
// the cluster's schema for the kind, and reset, the fields its
// reset-fields strategy drops from such a write (Schemas.ResetFields). It
// returns the conflicts as the API server reports them (the causes of its
// 409); an error when the apply fails for another reason (the schema
// refuses want, say).
func ApplyConflicts(tc managedfields.TypeConverter, reset map[fieldpath.APIVersion]fieldpath.Filter, live, want *unstructured.Unstructured, manager string) ([]metav1.StatusCause, error) {
	gvk := want.GroupVersionKind()
	fm, err := managedfields.NewDefaultFieldManager(tc, sameVersion{gvk.GroupVersion()}, noDefaults{}, creater{}, gvk, gvk.GroupVersion(), "", reset)
	if err != nil {
		return nil, err
	}
	applied, err := asDecoded(want)
	if err != nil {
		return nil, err
	}
	applied.SetManagedFields(nil)
	_, err = fm.Apply(live.DeepCopy(), applied, manager, false)
	if err == nil {
		return nil, nil
	}
	if causes := conflictCauses(err); causes != nil {
		return causes, nil
	}
	return nil, err
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
		o = o.DeepCopy()
		gvk := o.GroupVersionKind()
		if m, err := c.Reader.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			if m.Scope.Name() == meta.RESTScopeNameNamespace && o.GetNamespace() == "" {
				o.SetNamespace(namespace)
			} else if m.Scope.Name() != meta.RESTScopeNameNamespace {
				o.SetNamespace("")
			}
		}
		out[key(o)] = true
	}
	return out
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

// Objects are the objects of a manifest (a YAML stream as Helm renders
// and stores it), in its order; empty documents and documents without a
// kind are skipped.
func Objects(manifest string) ([]*unstructured.Unstructured, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	// SplitManifests names them manifest-0, manifest-1, …
	sort.Slice(keys, func(i, j int) bool {
		return len(keys[i]) < len(keys[j]) || len(keys[i]) == len(keys[j]) && keys[i] < keys[j]
	})
	var out []*unstructured.Unstructured
	for i, k := range keys {
		doc := docs[k]
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if u.Object == nil || u.GetKind() == "" {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// MaxShown is the longest value a line for people shows in full (Clip);
// a value in -o json or -o yaml is never cut.
const MaxShown = 120

// show is a value, whole: a string as it is, anything else as JSON;
// "(unset)" when absent.
func show(v any, ok bool) string {
	if !ok {
		return "(unset)"
	}
	if str, isStr := v.(string); isStr {
		return str
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Clip is a value of show for a line: cut to MaxShown bytes (on a rune
// boundary), with "…" where it was cut.
func Clip(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	cut := MaxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// WaysOut says what an operator can do about conflicts, as one line.
const WaysOut = "the ways out: revert the other manager's change; or make it the chart's, as a value or a rule of the spec (adopt, where a value renders it); " +
	"or set apply.forceConflicts: true in the spec, and the upgrade takes the fields (the other manager's change is lost)"

// WaysOutNoForce is WaysOut for an applier that cannot force (Fleet).
const WaysOutNoForce = "the ways out: revert the other manager's change; or make it the chart's, as a value or a rule of the spec (adopt, where a value renders it) " +
	"(Fleet cannot force conflicts, so apply.forceConflicts is not one)"

// Note is what the check did, for the log: objects, managers, requests,
// time, and the objects it could not check, each with the reason.
func (r Result) Note(took time.Duration) string {
	s := fmt.Sprintf("conflict check: %d objects checked against their managedFields as %s in %s, %d requests",
		r.Checked, strings.Join(r.Managers, ", "), took.Round(time.Millisecond), r.Requests)
	if len(r.NotChecked) > 0 {
		s += fmt.Sprintf("; %d not checked: %s", len(r.NotChecked), strings.Join(r.NotChecked, "; "))
	}
	return s
}

// How an apply treats a field another manager owns.
type How struct {
	// ServerSide: the apply is server-side; else client-side (a three-way
	// merge, which meets no conflict and overwrites what the chart
	// changes).
	ServerSide bool
	// Force: a server-side apply takes the conflicting fields.
	Force bool
	// Applier names who applies, for people: `Helm applies this release`.
	Applier string
	// Self is the applier's field manager: its own entries (of an earlier
	// client-side apply) are no conflict.
	Self string
	// TakesOwnership: the applier adopts an existing object without the
	// release's ownership metadata (Helm's --take-ownership; Fleet's
	// agent); else it refuses to.
	TakesOwnership bool
}

// Judge sorts what Check found for an apply made as how says: a conflict
// of a server-side apply that does not force is refused (one line each,
// then WaysOut); one it forces, and a field a client-side apply
// overwrites, is a warning.
func Judge(res Result, how How) (refused []string, warnings []values.Warning) {
	for _, k := range res.Conflicts {
		if k.OwnerName == how.Self || k.OwnerName == k.AppliedAs {
			continue // the applier's own entries
		}
		inValues := ""
		if k.Values != "" {
			inValues = "; " + k.Values
		}
		switch {
		case how.ServerSide && !how.Force:
			refused = append(refused, fmt.Sprintf("field-manager conflict: %s; %s server-side as %q and would fail%s", k, how.Applier, k.AppliedAs, inValues))
		case how.ServerSide:
			warnings = append(warnings, values.Warning{Kind: values.WarnFieldOwner, Path: k.Object + " " + k.Field,
				Message: fmt.Sprintf("%s; apply.forceConflicts is true: the upgrade takes the field%s", k, inValues)})
		case !k.Unchanged:
			warnings = append(warnings, values.Warning{Kind: values.WarnFieldOwner, Path: k.Object + " " + k.Field,
				Message: fmt.Sprintf("%s; %s client-side and overwrites it%s", k, how.Applier, inValues)})
		}
	}
	if len(refused) > 0 {
		refused = append(refused, WaysOut)
	}
	for _, u := range res.Unowned {
		if how.TakesOwnership {
			warnings = append(warnings, values.Warning{Kind: values.WarnTakeOwnership, Path: u.Object,
				Message: fmt.Sprintf("%s exists without this release's ownership metadata (%s); %s with takeOwnership and adopts it", u.Object, u.Why, how.Applier)})
			continue
		}
		refused = append(refused, fmt.Sprintf("ownership conflict: %s exists and cannot be imported into the release: invalid ownership metadata; %s; %s", u.Object, u.Why, adoptHint(u.Object)))
	}
	for _, n := range res.NotChecked {
		warnings = append(warnings, values.Warning{Kind: values.WarnNotChecked, Path: strings.SplitN(n, ": ", 2)[0], Message: n})
	}
	return refused, warnings
}

// adoptHint says how an operator lets Helm adopt an object: Helm's own
// ownership metadata, set with kubectl, or the object deleted.
func adoptHint(object string) string {
	return "to let the release adopt it, give it the label " + managedByLabel + "=" + managedByHelm +
		" and the annotations " + releaseNameKey + " and " + releaseNamespaceKey + " of the release (kubectl label and kubectl annotate " +
		object + "), or delete it"
}

// New is the Checker of one cluster: its objects read through dyn and
// mapper, access asked of kube before a list, its schemas read through
// kube's discovery.
func New(kube kubernetes.Interface, dyn dynamic.Interface, mapper meta.RESTMapper) Checker {
	return Checker{
		Reader:  liveobjects.Reader{Dynamic: dyn, Mapper: mapper, Access: &liveobjects.SelfAccess{Kube: kube}},
		Schemas: &Schemas{OpenAPI: kube.Discovery().OpenAPIV3()},
	}
}
