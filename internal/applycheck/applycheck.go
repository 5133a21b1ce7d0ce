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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

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
}

// Result is what the check found.
type Result struct {
	Conflicts []Conflict
	// Checked counts the objects that exist (each was applied in a dry
	// run); Requests the API requests made.
	Checked, Requests int
	// Managers are the field managers applied as, by name (with Manager
	// set: that one).
	Managers []string
}

// Checker checks against one API server.
type Checker struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
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
	type answer struct {
		conflicts []Conflict
		checked   bool
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
			a.conflicts, a.checked, a.requests, a.manager, a.err = c.one(ctx, obj, r)
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
	}
	for m := range managers {
		res.Managers = append(res.Managers, m)
	}
	sort.Strings(res.Managers)
	return res, errors.Join(errs...)
}

// one checks one object: the conflicts of its dry-run apply, whether it
// exists, the requests made and the manager applied as.
func (c Checker) one(ctx context.Context, obj *unstructured.Unstructured, r Request) ([]Conflict, bool, int, string, error) {
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
	if apierrors.IsNotFound(err) {
		return nil, false, requests, "", nil // its namespace does not exist yet
	}
	causes := conflictCauses(err)
	if causes == nil {
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
		k := Conflict{Object: describe(obj), Field: cause.Field, Owner: owner, OwnerName: ownerName(owner), Secret: secret}
		if path, err := ParsePath(cause.Field); err == nil {
			k.Live, k.New = show(path.Lookup(live.Object)), show(path.Lookup(obj.Object))
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
