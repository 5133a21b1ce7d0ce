// Package applycheck finds, before anything is written, the field-manager
// conflicts a server-side apply of a chart's objects would meet. Each object
// that exists is applied with dryRun=All and without force, as the field
// manager that really applies it (Helm's "helm", Fleet's agent…); the API
// server answers a conflict with the fields another manager owns, and
// nothing is stored. The package reads the live value of each such field
// and the value the chart would set, for the report (redacted in a
// Secret).
package applycheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/chart-upgrader/chart-upgrader/internal/values"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
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
}

// String is the conflict in one line: object, field, owner, values.
func (c Conflict) String() string {
	return fmt.Sprintf("%s %s is owned by %s (live: %s; the upgrade sets: %s)", c.Object, c.Field, c.Owner, c.Live, c.New)
}

// Request is what to check.
type Request struct {
	// Manifest is the chart's objects, one YAML stream.
	Manifest string
	// Namespace is the namespace of namespaced objects that name none
	// (the release's).
	Namespace string
	// Manager is the field manager to apply as; "" to take, per object,
	// the one that holds its Apply entry (ApplyManager), else Fallback.
	Manager, Fallback string
	// Old is the manifest deployed now ("": unknown), to tell the fields
	// the chart changes from those it does not (Conflict.Unchanged).
	Old string
}

// Result is what the check found.
type Result struct {
	Conflicts []Conflict
	// Checked counts the objects that exist (each was applied in a dry
	// run); Requests the API requests made.
	Checked, Requests int
	// Forbidden names the objects this process may not read or patch:
	// they were not checked (RBAC cannot grant a dry run alone).
	Forbidden []string
	// Managers are the field managers applied as, by name (with Manager
	// set: that one).
	Managers []string
}

// Checker checks against one API server.
type Checker struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// Access, when set, is asked first whether this process may get and
	// patch the objects of a resource in a namespace ("" for a
	// cluster-scoped one); the objects it may not are left unchecked
	// (Result.Forbidden) without a refused request. A process that applies
	// the chart itself (a release) needs no such question.
	Access Access
}

// Access says whether this process may get and patch resource in
// namespace.
type Access interface {
	Allowed(ctx context.Context, resource schema.GroupVersionResource, namespace string) (bool, error)
}

// parallel is how many objects are checked at once.
const parallel = 8

// Check applies each object of r.Manifest in a dry run and collects the
// conflicts, in manifest order. An object of a kind the cluster does not
// serve yet (a CRD the chart brings) or that does not exist is new: it
// cannot conflict, and is skipped. Any other error of the API server fails
// the check, naming the object.
func (c Checker) Check(ctx context.Context, r Request) (Result, error) {
	objs, err := Objects(r.Manifest)
	if err != nil {
		return Result{}, fmt.Errorf("reading the rendered manifest: %w", err)
	}
	old := map[string]map[string]any{} // by kind/name
	if r.Old != "" {
		olds, err := Objects(r.Old)
		if err != nil {
			return Result{}, fmt.Errorf("reading the deployed manifest: %w", err)
		}
		for _, o := range olds {
			old[o.GetKind()+"/"+o.GetName()] = o.Object
		}
	}
	type answer struct {
		conflicts []Conflict
		checked   bool
		forbidden string
		requests  int
		manager   string
		err       error
	}
	answers := make([]answer, len(objs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, obj := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			a := &answers[i]
			a.conflicts, a.checked, a.requests, a.manager, a.err = c.one(ctx, obj, r, old[obj.GetKind()+"/"+obj.GetName()])
			if apierrors.IsForbidden(a.err) {
				a.forbidden, a.err = describe(obj), nil
			}
		}()
	}
	wg.Wait()
	var res Result
	var errs []error
	managers := map[string]bool{}
	for _, a := range answers {
		res.Conflicts = append(res.Conflicts, a.conflicts...)
		res.Requests += a.requests
		if a.checked {
			res.Checked++
			managers[a.manager] = true
		}
		if a.err != nil {
			errs = append(errs, a.err)
		}
		if a.forbidden != "" {
			res.Forbidden = append(res.Forbidden, a.forbidden)
		}
	}
	for m := range managers {
		res.Managers = append(res.Managers, m)
	}
	sort.Strings(res.Managers)
	return res, errors.Join(errs...)
}

// one checks one object: the conflicts of its dry-run apply, whether it
// exists, the requests made and the manager applied as.
func (c Checker) one(ctx context.Context, obj *unstructured.Unstructured, r Request, old map[string]any) ([]Conflict, bool, int, string, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil, false, 0, "", nil // a kind the chart brings: new
	}
	if err != nil {
		return nil, false, 0, "", fmt.Errorf("%s: %w", describe(obj), err)
	}
	var client dynamic.ResourceInterface = c.Dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(r.Namespace)
		}
		client = c.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	} else {
		obj.SetNamespace("")
	}
	requests := 0
	if c.Access != nil {
		ok, err := c.Access.Allowed(ctx, mapping.Resource, obj.GetNamespace())
		if err != nil {
			return nil, false, 0, "", fmt.Errorf("%s: asking whether this process may read and patch it: %w", describe(obj), err)
		}
		if !ok {
			return nil, false, 0, "", apierrors.NewForbidden(mapping.Resource.GroupResource(), obj.GetName(), errors.New("no get and patch"))
		}
	}
	manager := r.Manager
	var live *unstructured.Unstructured
	if manager == "" {
		requests++
		if live, err = client.Get(ctx, obj.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil, false, requests, "", nil
		} else if err != nil {
			return nil, false, requests, "", fmt.Errorf("reading %s: %w", describe(obj), err)
		}
		if manager = ApplyManager(live); manager == "" {
			manager = r.Fallback
		}
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, false, requests, "", fmt.Errorf("%s: %w", describe(obj), err)
	}
	force := false
	requests++
	_, err = client.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: manager, Force: &force})
	if err == nil {
		return nil, true, requests, manager, nil
	}
	causes := conflictCauses(err)
	if causes == nil {
		if apierrors.IsForbidden(err) {
			return nil, false, requests, "", err
		}
		if refusedObject(err) {
			// not a conflict: the apply itself meets it and says so (a
			// namespace not there yet, an object the API server or an
			// admission webhook refuses)
			return nil, false, requests, "", nil
		}
		return nil, true, requests, manager, fmt.Errorf("a server-side dry-run apply of %s as %q: %w", describe(obj), manager, err)
	}
	if live == nil {
		requests++
		if live, err = client.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
			return nil, true, requests, manager, fmt.Errorf("reading %s: %w", describe(obj), err)
		}
	}
	secret := gvk.Group == "" && gvk.Kind == "Secret"
	var out []Conflict
	for _, cause := range causes {
		owner := strings.TrimPrefix(cause.Message, "conflict with ")
		k := Conflict{Object: describe(obj), Field: cause.Field, Owner: owner, OwnerName: ownerName(owner), Secret: secret, AppliedAs: manager}
		if path, err := ParsePath(cause.Field); err == nil {
			k.Live, k.New = show(path.Lookup(live.Object)), show(path.Lookup(obj.Object))
			if old != nil {
				ov, ook := path.Lookup(old)
				nv, nok := path.Lookup(obj.Object)
				k.Unchanged = ook == nok && sameValue(ov, nv)
			}
		} else {
			k.Live, k.New = "(unread)", "(unread)"
		}
		if secret {
			k.Live, k.New = "(redacted)", "(redacted)"
		}
		out = append(out, k)
	}
	return out, true, requests, manager, nil
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

// refusedObject says whether err is the API server's answer about the
// object itself (not found, invalid, forbidden, refused by admission…),
// rather than a failure to ask.
func refusedObject(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)
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

// describe names an object for people: Kind namespace/name.
func describe(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return obj.GetKind() + " " + ns + "/" + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetName()
}

// maxShown is the longest value shown in full.
const maxShown = 120

// show is a value for people: a string as it is, anything else as JSON;
// "(unset)" when absent; cut to maxShown.
func show(v any, ok bool) string {
	if !ok {
		return "(unset)"
	}
	var s string
	if str, isStr := v.(string); isStr {
		s = str
	} else {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	if len(s) > maxShown {
		s = s[:maxShown] + "…"
	}
	return s
}

// WaysOut says what an operator can do about conflicts, as one line.
const WaysOut = "the ways out: revert the other manager's change; or make it the chart's, as a value or a rule of the spec; " +
	"or set apply.forceConflicts: true in the spec, and the upgrade takes the fields (the other manager's change is lost)"

// WaysOutNoForce is WaysOut for an applier that cannot force (Fleet).
const WaysOutNoForce = "the ways out: revert the other manager's change; or make it the chart's, as a value or a rule of the spec " +
	"(Fleet cannot force conflicts, so apply.forceConflicts is not one)"

// Note is what the check did, for the log: objects, managers, requests,
// time, and the objects it could not check.
func (r Result) Note(took time.Duration) string {
	s := fmt.Sprintf("conflict check: %d objects applied in a server-side dry run as %s in %s, %d requests",
		r.Checked, strings.Join(r.Managers, ", "), took.Round(time.Millisecond), r.Requests)
	if len(r.Forbidden) > 0 {
		s += fmt.Sprintf("; %d not checked, this process may not read or patch them (grant get and patch on their kinds to check them): %s",
			len(r.Forbidden), strings.Join(r.Forbidden, ", "))
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
		switch {
		case how.ServerSide && !how.Force:
			refused = append(refused, fmt.Sprintf("field-manager conflict: %s; %s server-side as %q and would fail", k, how.Applier, k.AppliedAs))
		case how.ServerSide:
			warnings = append(warnings, values.Warning{Kind: values.WarnFieldOwner, Path: k.Object + " " + k.Field,
				Message: fmt.Sprintf("%s; apply.forceConflicts is true: the upgrade takes the field", k)})
		case !k.Unchanged:
			warnings = append(warnings, values.Warning{Kind: values.WarnFieldOwner, Path: k.Object + " " + k.Field,
				Message: fmt.Sprintf("%s; %s client-side and overwrites it", k, how.Applier)})
		}
	}
	if len(refused) > 0 {
		refused = append(refused, WaysOut)
	}
	return refused, warnings
}
