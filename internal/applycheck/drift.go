package applycheck

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Drifted is one field of an object a chart renders that differs live
// from what the deployed revision rendered, or that a field manager other
// than the chart's applier owns.
type Drifted struct {
	Kind, Namespace, Name string
	Object                string // Kind namespace/name
	Field                 string // the field path, as the API server prints it
	// Steps are the field's concrete steps in the rendered object (map
	// keys and list indices), for provenance.
	Steps []any
	// Managers own the field beside or instead of the applier: name and
	// operation (`kubectl-set (Update)`); Owner is the first one's name.
	Managers []string
	Owner    string
	// Live and Rendered are the values; LiveSet is false when the live
	// object lacks the field.
	Live, Rendered any
	LiveSet        bool
	// Differs: the live value is not the rendered one.
	Differs bool
	// Secret: the object is a Secret; its values are never shown.
	Secret bool
}

// DriftRequest is what to compare: the manifest the deployed revision
// rendered, the namespace of objects that name none, and the applier's
// field manager (Manager; "" to take the one holding each object's Apply
// entry, else Fallback).
type DriftRequest struct {
	Manifest, Namespace string
	Manager, Fallback   string
}

// DriftResult is what Drift found, in manifest order.
type DriftResult struct {
	Fields []Drifted
	// Checked counts the objects compared; Missing names those the
	// cluster does not have; NotChecked those that could not be read or
	// have no schema, with why.
	Checked    int
	Missing    []string
	NotChecked []string
	Requests   int
}

// Drift reads the live copy of each object of r.Manifest and lists its
// drifted fields (FieldDrift). It writes nothing.
func (c Checker) Drift(ctx context.Context, r DriftRequest) (DriftResult, error) {
	objs, err := manifest.Objects(r.Manifest)
	if err != nil {
		return DriftResult{}, fmt.Errorf("reading the deployed manifest: %w", err)
	}
	read, err := c.Reader.Read(ctx, objs, r.Namespace)
	if err != nil {
		return DriftResult{}, err
	}
	res := DriftResult{Requests: read.Requests}
	c.Schemas.prefetch(ctx, read.Objects)
	for _, o := range read.Objects {
		switch {
		case o.Unread != "":
			res.NotChecked = append(res.NotChecked, o.Name()+": "+o.Unread)
			continue
		case o.Live == nil:
			res.Missing = append(res.Missing, o.Name())
			continue
		}
		tc, err := c.Schemas.Converter(ctx, o.Want.GroupVersionKind())
		if err != nil {
			res.NotChecked = append(res.NotChecked, o.Name()+": "+err.Error())
			continue
		}
		applier := r.Manager
		if applier == "" {
			if applier = ApplyManager(o.Live); applier == "" {
				applier = r.Fallback
			}
		}
		fields, err := FieldDrift(tc, c.Schemas.ResetFields(ctx, o.Want.GroupVersionKind()), o.Want, o.Live, applier)
		if err != nil {
			res.NotChecked = append(res.NotChecked, o.Name()+": "+err.Error())
			continue
		}
		res.Checked++
		res.Fields = append(res.Fields, fields...)
	}
	if c.Schemas != nil {
		res.Requests += c.Schemas.fetched()
	}
	return res, nil
}

// FieldDrift compares each field rendered sets (its leaves, as the kind's
// schema tc types them) with live: a field whose value differs, or that a
// manager other than applier owns (live's managedFields), is listed. Left
// out, as no one but the API server and the applier sets them: the
// identity fields, the metadata the API server sets, Helm's ownership
// metadata, a Secret's stringData (the API server folds it into data),
// the fields reset drops from a write of the object (its status, for a
// kind with a status subresource: Schemas.ResetFields), a field rendered
// null (unset: what the server holds there it defaulted, as replicas: 1)
// and an empty or zero value the server does not keep (emptyValue).
func FieldDrift(tc managedfields.TypeConverter, reset map[fieldpath.APIVersion]fieldpath.Filter, rendered, live *unstructured.Unstructured, applier string) ([]Drifted, error) {
	want, set, err := fieldSet(tc, rendered)
	if err != nil {
		return nil, fmt.Errorf("the rendered object: %w", err)
	}
	if f := reset[fieldpath.APIVersion(rendered.GroupVersionKind().GroupVersion().String())]; f != nil {
		set = f.Filter(set)
	}
	type owner struct {
		name, label string
		set         *fieldpath.Set
	}
	var owners []owner
	for _, e := range live.GetManagedFields() {
		if e.Manager == applier || e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			continue
		}
		label := fmt.Sprintf("%s (%s)", e.Manager, e.Operation)
		if e.Subresource != "" {
			label = fmt.Sprintf("%s (%s of %s)", e.Manager, e.Operation, e.Subresource)
		}
		owners = append(owners, owner{name: e.Manager, label: label, set: s})
	}
	secret := isSecret(rendered)
	var out []Drifted
	set.Leaves().Iterate(func(fp fieldpath.Path) {
		printed := fp.String()
		if skipDrift(fp, secret) {
			return
		}
		// by its structured path: the printed one cannot be parsed back
		// when a key holds a dot (app.kubernetes.io/name)
		p := pathOf(fp)
		// a list element's key the chart leaves to its default (a port's
		// protocol) is in the field set's path, not in the rendered object
		inRendered := p.lenient()
		rv, _ := inRendered.Lookup(want.Object)
		lv, lok := p.Lookup(live.Object)
		steps, _ := inRendered.Steps(want.Object)
		d := Drifted{Kind: rendered.GetKind(), Namespace: rendered.GetNamespace(), Name: rendered.GetName(),
			Object: liveobjects.Describe(rendered), Field: printed, Rendered: rv, Live: lv, LiveSet: lok, Secret: secret,
			Differs: lok && rv != nil && !covers(rv, lv) || !lok && !emptyValue(rv)}
		for _, o := range owners {
			if o.set.Has(fp) {
				d.Managers = append(d.Managers, o.label)
				if d.Owner == "" {
					d.Owner = o.name
				}
			}
		}
		if d.Differs && len(d.Managers) == 0 && rv == "" {
			// rendered empty, filled and owned by no other manager: the
			// API server's default for a field an empty string leaves
			// unset (a Service's externalTrafficPolicy: "" is Cluster)
			d.Differs = false
		}
		if !d.Differs && len(d.Managers) == 0 {
			return
		}
		d.Steps = steps
		out = append(out, d)
	})
	// the elements another manager added to a list the chart renders
	// (a Service port `kubectl patch` added): the list is the field
	added := map[string]*Drifted{}
	var order []string
	for _, o := range owners {
		o.set.Difference(set).Leaves().Iterate(func(fp fieldpath.Path) {
			list, ok := addedElementList(fp, set)
			if !ok || skipDrift(list, secret) {
				return
			}
			key := list.String()
			d := added[key]
			if d == nil {
				p := pathOf(list)
				rv, rok := p.Lookup(want.Object)
				lv, lok := p.Lookup(live.Object)
				steps, sok := p.Steps(want.Object)
				if !rok || !lok || !sok {
					return
				}
				d = &Drifted{Kind: rendered.GetKind(), Namespace: rendered.GetNamespace(), Name: rendered.GetName(),
					Object: liveobjects.Describe(rendered), Field: key, Rendered: rv, Live: lv, LiveSet: true, Secret: secret,
					Differs: true, Steps: steps}
				added[key] = d
				order = append(order, key)
			}
			if !slices.Contains(d.Managers, o.label) {
				d.Managers = append(d.Managers, o.label)
				if d.Owner == "" {
					d.Owner = o.name
				}
			}
		})
	}
	for _, k := range order {
		out = append(out, *added[k])
	}
	return out, nil
}

// addedElementList is the list a field another manager owns was added to
// as an element of it (a list element the rendered set does not hold,
// in a list it holds other elements of): the list's path.
func addedElementList(fp fieldpath.Path, rendered *fieldpath.Set) (fieldpath.Path, bool) {
	for i, pe := range fp {
		if pe.Key == nil && pe.Value == nil && pe.Index == nil {
			continue
		}
		if holds(rendered, fp[:i+1]) {
			continue // the chart renders this element: deeper
		}
		if !holds(rendered, fp[:i]) {
			return nil, false // nor the list: not a list the chart renders
		}
		return fp[:i].Copy(), true
	}
	return nil, false
}

// holds says whether set has p or a field under it.
func holds(set *fieldpath.Set, p fieldpath.Path) bool {
	if set.Has(p) {
		return true
	}
	under := set
	for _, pe := range p {
		if under = under.WithPrefix(pe); under.Empty() {
			return false
		}
	}
	return true
}

// skipDrift: the identity of the object, the metadata the API server
// sets, Helm's ownership metadata, and what the API server rewrites.
func skipDrift(fp fieldpath.Path, secret bool) bool {
	name := func(i int) string {
		if i < len(fp) && fp[i].FieldName != nil {
			return *fp[i].FieldName
		}
		return ""
	}
	switch top := name(0); {
	case len(fp) == 1 && (top == "apiVersion" || top == "kind"):
		return true
	case top == "stringData":
		return secret
	case top != "metadata":
		return false
	}
	switch field := name(1); {
	case field == "name" || field == "namespace" || slices.Contains(serverMetadata, field):
		return true
	case field == "annotations":
		return len(fp) == 3 && (name(2) == releaseNameKey || name(2) == releaseNamespaceKey)
	case field == "labels":
		return len(fp) == 3 && name(2) == managedByLabel
	}
	return false
}

// covers says whether the live value is the rendered one, with what the
// API server adds to it (an empty value it stores as null): the keys a map rendered whole (an atomic map,
// fieldRef) gains by defaulting (apiVersion: v1), each compared the same
// way; lists element by element; leaves by sameField.
func covers(rendered, live any) bool {
	if live == nil && emptyValue(rendered) {
		return true // a ClusterRole's rules: [] stored as rules: null
	}
	switch r := rendered.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, rv := range r {
			lv, ok := l[k]
			if !ok && !emptyValue(rv) || ok && !covers(rv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(r) {
			return false
		}
		for i := range r {
			if !covers(r[i], l[i]) {
				return false
			}
		}
		return true
	}
	return sameField(rendered, live)
}

// emptyValue: null, an empty list or map, false, "" or 0, which the API
// server does not keep in a kind of its own (its types omit them when
// empty: a rendered tolerations: [], a PriorityClass's globalDefault:
// false, an env var's value: "" read back unset).
func emptyValue(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	case bool:
		return !t
	case string:
		return t == ""
	case int64:
		return t == 0
	case float64:
		return t == 0
	case int:
		return t == 0
	}
	return false
}

// sameField compares a rendered and a live value: as JSON values, or as
// the same quantity written two ways (1024Mi and 1Gi).
func sameField(a, b any) bool {
	if values.Equal(a, b) {
		return true
	}
	as, aok := a.(string)
	bs, bok := b.(string)
	if !aok || !bok {
		return false
	}
	qa, err1 := resource.ParseQuantity(as)
	qb, err2 := resource.ParseQuantity(bs)
	return err1 == nil && err2 == nil && qa.Cmp(qb) == 0
}

// ValuesDrift is Drift with each field read back in values terms against
// trace (the deployed chart rendered with the deployed values), as the
// core reports it; values of a Secret are redacted. With no trace (no
// chart at hand), each field says so instead.
func (c Checker) ValuesDrift(ctx context.Context, r DriftRequest, trace *provenance.Map) (upgrade.DriftReport, error) {
	res, err := c.Drift(ctx, r)
	if err != nil {
		return upgrade.DriftReport{}, err
	}
	out := upgrade.DriftReport{Missing: res.Missing, NotChecked: res.NotChecked,
		Note: fmt.Sprintf("%d objects compared with what the deployed revision rendered, %d requests", res.Checked, res.Requests)}
	for _, d := range res.Fields {
		f := upgrade.DriftField{Object: d.Object, Field: d.Field, Managers: d.Managers, Owner: d.Owner,
			Live: show(d.Live, d.LiveSet), Rendered: show(d.Rendered, true), Differs: d.Differs, Secret: d.Secret}
		if f.Managers == nil {
			f.Managers = []string{}
		}
		if d.Secret {
			f.Live, f.Rendered = provenance.Redacted, provenance.Redacted
		}
		if trace == nil {
			f.Reading.Reason = "no chart at hand to read it in values terms"
		} else {
			id := provenance.ObjectID{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
			if f.Reading, f.Secret = readField(trace, id, d.Steps, d.Live, d.LiveSet, d.Secret); f.Secret {
				f.Live, f.Rendered = provenance.Redacted, provenance.Redacted
			}
		}
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

// readField reads a field back in values terms; a Secret's field, or one
// a value named like a secret renders, comes back redacted, and secret
// says so.
func readField(trace *provenance.Map, id provenance.ObjectID, steps []any, live any, liveSet, secret bool) (provenance.Reading, bool) {
	r := trace.Read(id, steps, live, liveSet, secret)
	if !secret && secretPath(r) {
		secret, r = true, trace.Read(id, steps, live, liveSet, true)
	}
	if secret {
		r = redactReading(r)
	}
	return r, secret
}

func secretPath(r provenance.Reading) bool {
	for _, a := range r.Assignments {
		if values.LooksSecret(a.Path) {
			return true
		}
	}
	return false
}

// redactReading hides the values of a Secret's field read back; what
// adopt writes (Adopt) is kept, it is never shown.
func redactReading(r provenance.Reading) provenance.Reading {
	as := make([]provenance.Assignment, len(r.Assignments))
	for i, a := range r.Assignments {
		a.Value, a.Was = provenance.Redacted, provenance.Redacted
		as[i] = a
	}
	r.Assignments = as
	return r
}
