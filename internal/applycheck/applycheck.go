// Package applycheck finds, before anything is written, the field-manager
// conflicts a server-side apply of a chart's objects would meet, the
// objects Helm would refuse to adopt, and the objects of a kind the
// cluster does not serve at the chart's version. It reads each live object (with its
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
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
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
	// Recreate lists the objects (Kind/name, Kind/namespace/name) to
	// delete and create again where the API server would refuse their
	// update (recreate.go).
	Recreate []string
	// CRDs are the CustomResourceDefinitions of the chart's crds/ the
	// upgrade creates or replaces before the chart (apply.crds): the kinds
	// they define are served after them, and judged by their schemas.
	CRDs []*unstructured.Unstructured
}

// Result is what the check found.
type Result struct {
	Conflicts []Conflict
	// Findings are what the other checks found (check.go), in the order
	// they ran, each object's in manifest order: the objects of a kind
	// the cluster does not serve (unserved.go), namespaces that do not
	// exist (namespaces.go), objects Helm would not adopt (ownership.go),
	// that the API server would refuse to store (rejected.go), or that the
	// upgrade recreates (recreate.go).
	Findings []Finding
	// Checked counts the objects that exist and were checked; Requests
	// the API requests made (reads, access questions, schemas).
	Checked, Requests int
	// NotChecked names each object that exists, or may, and was not
	// checked, with the reason (unreadable: the rule to add; no schema).
	NotChecked []string
	// Managers are the field managers applied as, by name.
	Managers []string

	// changes are each object before and after the apply (Changes).
	changes []change
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
	objs, err := manifest.Objects(r.Manifest)
	if err != nil {
		return Result{}, fmt.Errorf("reading the rendered manifest: %w", err)
	}
	old := map[string]map[string]any{} // by group, kind, namespace and name (identity)
	var olds []*unstructured.Unstructured
	if r.Old != "" {
		if olds, err = manifest.Objects(r.Old); err != nil {
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
	listed, err := listedForRecreate(read.Objects, r.Recreate)
	if err != nil {
		return Result{}, err
	}
	if len(r.CRDs) > 0 && c.Schemas != nil {
		if err := c.Schemas.Replace(r.CRDs); err != nil {
			return Result{}, err
		}
	}
	scope := Scope{Checker: c, Request: r, Objects: objs, Read: read.Objects, Olds: olds, memo: &sync.Map{}}
	res := Result{Requests: read.Requests}
	for _, check := range manifestChecks {
		if err := check(ctx, scope, &res); err != nil {
			return Result{}, err
		}
	}
	deployed := c.keys(olds, r.Namespace)

	type answer struct {
		conflicts []Conflict
		found     []Finding
		stored    *unstructured.Unstructured // what the apply stores
		reason    string
		manager   string
	}
	answers := make([]answer, len(read.Objects))
	c.Schemas.prefetch(ctx, read.Objects)
	// the applies are computed in this process: as many at once as there
	// are CPUs (the schemas they need are read above)
	var applies errgroup.Group
	applies.SetLimit(runtime.GOMAXPROCS(0))
	for i, o := range read.Objects {
		a := &answers[i]
		if o.Unread != "" {
			a.reason = o.Unread
			continue
		}
		if o.Live == nil {
			applies.Go(func() error {
				var rejected *Rejected
				rejected, a.stored = c.created(ctx, o, r)
				a.found = scope.judge(ctx, o, a.stored, rejected)
				return nil
			})
			continue
		}
		if r.Release != "" && r.Old != "" && !deployed[key(o.Want)] {
			if why := ownership(o.Live, r.Release, r.Namespace); why != "" {
				a.found = append(a.found, Unowned{Object: o.Name(), Why: why})
			}
		}
		applies.Go(func() error {
			a.manager = r.Manager
			if a.manager == "" {
				if a.manager = ApplyManager(o.Live); a.manager == "" {
					a.manager = r.Fallback
				}
			}
			want := r.applied(o.Want)
			var rejected *Rejected
			a.conflicts, rejected, a.stored, a.reason = c.one(ctx, o, want, a.manager, old[identity(o.Want, r.Namespace)])
			if listed[i] && rejected != nil && rejected.Update && rejected.Immutable {
				var recreated *Recreated
				if recreated, rejected = c.recreate(ctx, o, r, rejected); recreated != nil {
					a.found = append(a.found, *recreated)
				}
			}
			a.found = append(a.found, scope.judge(ctx, o, a.stored, rejected)...)
			return nil
		})
	}
	_ = applies.Wait() // each answer holds its own reason
	managers := map[string]bool{}
	for i, a := range answers {
		res.Conflicts = append(res.Conflicts, a.conflicts...)
		res.Findings = append(res.Findings, a.found...)
		if a.stored != nil {
			o := read.Objects[i]
			res.changes = append(res.changes, change{object: o.Name(), before: o.Live, after: a.stored})
		}
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
	wanted := map[string]bool{}
	for _, o := range objs {
		wanted[identity(o, r.Namespace)] = true
	}
	for _, o := range olds {
		if !wanted[identity(o, r.Namespace)] {
			gone := c.placed(o, r.Namespace)
			res.changes = append(res.changes, change{object: liveobjects.Describe(gone), before: gone})
		}
	}
	if err := inValues(res.Conflicts, FindingsOf[*Rejected](res.Findings), r.Trace); err != nil {
		return Result{}, err
	}
	sort.Strings(res.Managers)
	if c.Schemas != nil {
		res.Requests += c.Schemas.fetched()
	}
	return res, nil
}

// created is the verdict on creating o's object (it has no live copy):
// typed against its kind's schema, validated as the server validates a
// create; nil when the server would store it. And the object created.
// A kind the cluster does not serve yet (a CRD of the chart defines it)
// is created unjudged.
func (c Checker) created(ctx context.Context, o liveobjects.Object, r Request) (*Rejected, *unstructured.Unstructured) {
	want := r.applied(o.Want)
	decoded, err := asDecoded(want)
	if err != nil {
		return &Rejected{Object: o.Name(), Why: err.Error()}, want
	}
	if o.Mapping == nil { // judged only by the schema of a CRD the upgrade applies first
		if k, ok := c.Schemas.owned(want.GroupVersionKind()); ok {
			return judgeStored(k.tc, o, decoded), decoded
		}
		return nil, decoded
	}
	tc, _ := c.Schemas.Converter(ctx, want.GroupVersionKind()) // none: the server's rules alone
	return judgeStored(tc, o, decoded), decoded
}

// applied is obj as the apply sends it: with the release's ownership
// metadata, as Helm adds it.
func (r Request) applied(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	if r.Release != "" {
		setOwnership(out, r.Release, r.Namespace)
	}
	return out
}

// judge is the findings on storing o's object as stored: the API
// server's refusal (rejected), or else what each objectCheck finds. An
// object stored as nothing (it could not be read) is judged by nothing.
func (s Scope) judge(ctx context.Context, o liveobjects.Object, stored *unstructured.Unstructured, rejected *Rejected) []Finding {
	if rejected != nil {
		return []Finding{rejected} // the server stops at its first refusal
	}
	if stored == nil {
		return nil
	}
	var out []Finding
	for _, check := range objectChecks {
		if f := check(ctx, s, o, stored); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// one computes the conflicts of applying want over o.Live as manager, and
// the verdict on the object it stores (Rejected: its schema refuses want,
// or the server's rules refuse the update); a reason when it cannot (no
// schema for the kind). The fields the API server resets on such a write
// (a status) are left out, as it leaves them out.
func (c Checker) one(ctx context.Context, o liveobjects.Object, want *unstructured.Unstructured, manager string, old map[string]any) ([]Conflict, *Rejected, *unstructured.Unstructured, string) {
	gvk := want.GroupVersionKind()
	tc, err := c.Schemas.Converter(ctx, gvk)
	if err != nil {
		return nil, nil, nil, err.Error()
	}
	causes, stored, err := applyConflicts(tc, c.Schemas.ResetFields(ctx, gvk), o.Live, want, manager)
	if err != nil {
		r := schemaRejected(o, err)
		return nil, &r, nil, ""
	}
	rejected := judgeStored(nil, o, stored)
	if len(causes) == 0 {
		return nil, rejected, stored, ""
	}
	// each conflict's field by its structured path in want's field set:
	// the printed one cannot be parsed back when a key holds a dot
	paths, err := fieldPaths(tc, want)
	if err != nil {
		return nil, rejected, stored, err.Error()
	}
	secret := isSecret(want)
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
				k.Unchanged = ook == nok && values.Equal(ov, nv)
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
	return out, rejected, stored, ""
}

// inValues reads each conflict and each refused field back in values
// terms (Conflict.Values, Rejected.Values) against the provenance traceOf
// gives, asked once when there is either.
func inValues(conflicts []Conflict, rejected []*Rejected, traceOf func() (*provenance.Map, error)) error {
	refusedFields := false
	for _, r := range rejected {
		refusedFields = refusedFields || len(r.fields) > 0
	}
	if (len(conflicts) == 0 && !refusedFields) || traceOf == nil {
		return nil
	}
	trace, err := traceOf()
	if err != nil || trace == nil {
		return err
	}
	rejectedInValues(rejected, trace)
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

// New is the Checker of one cluster: its objects read through dyn and
// mapper, access asked of kube before a list (through access, whose
// answers the caller may share; nil: its own), its schemas read through
// kube's discovery.
func New(kube kubernetes.Interface, dyn dynamic.Interface, mapper meta.RESTMapper, access liveobjects.Access) Checker {
	if access == nil {
		access = &liveobjects.SelfAccess{Kube: kube}
	}
	return Checker{
		Reader:  liveobjects.Reader{Dynamic: dyn, Mapper: mapper, Access: access},
		Schemas: &Schemas{OpenAPI: kube.Discovery().OpenAPIV3()},
	}
}
