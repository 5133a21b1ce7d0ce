package applycheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
)

// Schemas are the cluster's OpenAPI v3 schemas, as structured-merge-diff
// type converters, one per kind, each built from its kind's schema and the
// schemas it refers to, out of its group-version's document, fetched once
// each (/openapi/v3 and its group-version documents, which Kubernetes'
// default system:discovery role lets every authenticated user read).
type Schemas struct {
	OpenAPI openapi.Client

	mu       sync.Mutex
	paths    map[string]openapi.GroupVersion
	pathsErr error
	byGV     map[schema.GroupVersion]*gvDoc
	// requests counts the documents fetched.
	requests int
	// own are the kinds of the CRDs an upgrade applies before the chart
	// (Replace): their schemas stand for the cluster's.
	own map[schema.GroupVersionKind]ownKind
}

// ownKind is a kind of a CRD the upgrade applies: its schema's converter,
// whether it has a status subresource, its schema in the API server's
// internal form (what customresource.go validates with), and whether it is
// namespaced.
type ownKind struct {
	tc         managedfields.TypeConverter
	status     bool
	schema     *apiextensions.JSONSchemaProps
	namespaced bool
}

// Replace makes the kinds of crds (CustomResourceDefinitions the upgrade
// applies before the chart, apply.crds) judged by their schemas from now
// on, as the API server will judge them after the apply: each version's
// OpenAPI schema built as the API server builds it for the CRD, and
// converted as it converts it for validation.
func (s *Schemas) Replace(crds []*unstructured.Unstructured) error {
	for _, u := range crds {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: %w", u.GetName(), err)
		}
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			doc, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
			if err != nil {
				return fmt.Errorf("the schema of CustomResourceDefinition %s at %s: %w", crd.Name, v.Name, err)
			}
			tc, err := managedfields.NewTypeConverter(doc.Components.Schemas, crd.Spec.PreserveUnknownFields)
			if err != nil {
				return fmt.Errorf("the schema of CustomResourceDefinition %s at %s: %w", crd.Name, v.Name, err)
			}
			k := ownKind{tc: tc, status: v.Subresources != nil && v.Subresources.Status != nil, namespaced: crd.Spec.Scope == apiextv1.NamespaceScoped}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				if k.schema, err = internalSchema(v.Schema.OpenAPIV3Schema); err != nil {
					return fmt.Errorf("the schema of CustomResourceDefinition %s at %s: %w", crd.Name, v.Name, err)
				}
			}
			s.mu.Lock()
			if s.own == nil {
				s.own = map[schema.GroupVersionKind]ownKind{}
			}
			s.own[gvk] = k
			s.mu.Unlock()
		}
	}
	return nil
}

// owned is gvk's schema when a CRD of Replace defines it.
func (s *Schemas) owned(gvk schema.GroupVersionKind) (ownKind, bool) {
	if s == nil {
		return ownKind{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.own[gvk]
	return k, ok
}

// gvDoc is one group-version's document: its schemas undecoded, by name,
// the name of each kind's, and the kinds served with a status
// subresource.
type gvDoc struct {
	once   sync.Once
	raw    map[string]json.RawMessage
	byKind map[string]string
	status map[string]bool
	err    error

	mu    sync.Mutex
	kinds map[string]*kindConverter
}

type kindConverter struct {
	once sync.Once
	tc   managedfields.TypeConverter
	err  error
}

// errNoSchema is the reason a kind cannot be checked: the cluster
// publishes no OpenAPI v3 schema for it (an aggregated API that serves
// none, say).
var errNoSchema = errors.New("the cluster publishes no OpenAPI v3 schema for it")

// Converter is the type converter of gvk.
func (s *Schemas) Converter(ctx context.Context, gvk schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	if k, ok := s.owned(gvk); ok {
		return k.tc, nil
	}
	d := s.doc(ctx, gvk.GroupVersion())
	if d.err != nil {
		return nil, d.err
	}
	d.mu.Lock()
	if d.kinds == nil {
		d.kinds = map[string]*kindConverter{}
	}
	k := d.kinds[gvk.Kind]
	if k == nil {
		k = &kindConverter{}
		d.kinds[gvk.Kind] = k
	}
	d.mu.Unlock()
	k.once.Do(func() { k.tc, k.err = d.converter(gvk) })
	return k.tc, k.err
}

// doc is gv's document, fetched on first use.
func (s *Schemas) doc(ctx context.Context, gv schema.GroupVersion) *gvDoc {
	s.mu.Lock()
	if s.byGV == nil {
		s.byGV = map[schema.GroupVersion]*gvDoc{}
	}
	d := s.byGV[gv]
	if d == nil {
		d = &gvDoc{}
		s.byGV[gv] = d
	}
	s.mu.Unlock()
	d.once.Do(func() {
		data, err := s.fetch(ctx, gv)
		if err != nil {
			d.err = err
			return
		}
		d.raw, d.byKind, d.status, d.err = index(gv, data)
	})
	return d
}

// ResetFields are the fields of gvk the API server resets on a write of
// the object itself, as its reset-fields strategy does, in the form its
// field manager takes them: status, for a kind served with a status
// subresource (every built-in kind that has one, and a CRD that declares
// subresources.status, CustomResourceDefinition itself included). An
// apply neither owns nor conflicts on them: the API server drops them
// from the applied object. nil for another kind.
func (s *Schemas) ResetFields(ctx context.Context, gvk schema.GroupVersionKind) map[fieldpath.APIVersion]fieldpath.Filter {
	if k, ok := s.owned(gvk); ok {
		if !k.status {
			return nil
		}
	} else if d := s.doc(ctx, gvk.GroupVersion()); d.err != nil || !d.status[gvk.Kind] {
		return nil
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{
		fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(statusSet),
	}
}

// statusSet is the status of an object, and everything under it.
var statusSet = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))

// statusKinds are the kinds of a group-version's paths served with a
// status subresource: those of its paths that end in /{name}/status.
func statusKinds(gv schema.GroupVersion, paths map[string]map[string]json.RawMessage) map[string]bool {
	out := map[string]bool{}
	for path, ops := range paths {
		if !strings.HasSuffix(path, "/{name}/status") {
			continue
		}
		for _, op := range ops {
			var ext struct {
				GVK struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
			}
			if json.Unmarshal(op, &ext) == nil && ext.GVK.Kind != "" && ext.GVK.Group == gv.Group && ext.GVK.Version == gv.Version {
				out[ext.GVK.Kind] = true
			}
		}
	}
	return out
}

// prefetch fetches the documents of the group-versions of the objects
// that exist, liveobjects.Parallel at once (a fetch is mostly waiting for
// the API server).
func (s *Schemas) prefetch(ctx context.Context, objs []liveobjects.Object) {
	seen := map[schema.GroupVersion]bool{}
	var fetches errgroup.Group
	fetches.SetLimit(liveobjects.Parallel)
	for _, o := range objs {
		gv := o.Want.GroupVersionKind().GroupVersion()
		if o.Live == nil || seen[gv] {
			continue
		}
		seen[gv] = true
		fetches.Go(func() error { s.doc(ctx, gv); return nil })
	}
	_ = fetches.Wait() // a document that could not be read is an object not checked, later
}

// fetched is how many documents were fetched (for the request count).
func (s *Schemas) fetched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Schemas) fetch(ctx context.Context, gv schema.GroupVersion) ([]byte, error) {
	s.mu.Lock()
	if s.paths == nil && s.pathsErr == nil {
		s.requests++
		s.paths, s.pathsErr = s.OpenAPI.Paths()
		if s.pathsErr != nil {
			s.pathsErr = fmt.Errorf("reading the cluster's OpenAPI v3 index (/openapi/v3): %w", s.pathsErr)
		}
	}
	paths, err := s.paths, s.pathsErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	path := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		path = "api/" + gv.Version
	}
	doc, ok := paths[path]
	if !ok {
		return nil, fmt.Errorf("%s: %w", gv, errNoSchema)
	}
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	data, err := doc.Schema(runtime.ContentTypeJSON)
	if err != nil {
		return nil, fmt.Errorf("reading the OpenAPI v3 schema of %s (/openapi/v3/%s): %w", gv, path, err)
	}
	return data, nil
}

// gvkExtension is the extension that names a schema's kinds.
const gvkExtension = "x-kubernetes-group-version-kind"

// index splits a group-version's document into its schemas, undecoded,
// finds the schema of each of its kinds, and the kinds served with a
// status subresource.
func index(gv schema.GroupVersion, data []byte) (map[string]json.RawMessage, map[string]string, map[string]bool, error) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, nil, fmt.Errorf("decoding the OpenAPI v3 schema of %s: %w", gv, err)
	}
	byKind := map[string]string{}
	for name, raw := range doc.Components.Schemas {
		if !bytes.Contains(raw, []byte(gvkExtension)) {
			continue
		}
		var ext struct {
			GVK []struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
		}
		if err := json.Unmarshal(raw, &ext); err != nil {
			return nil, nil, nil, fmt.Errorf("decoding the OpenAPI v3 schema %s of %s: %w", name, gv, err)
		}
		for _, g := range ext.GVK {
			if g.Group == gv.Group && g.Version == gv.Version {
				byKind[g.Kind] = name
			}
		}
	}
	if len(byKind) == 0 {
		return nil, nil, nil, fmt.Errorf("%s: %w", gv, errNoSchema)
	}
	return doc.Components.Schemas, byKind, statusKinds(gv, doc.Paths), nil
}

// schemaRef is a reference from one schema to another in a document.
var schemaRef = regexp.MustCompile(`"\$ref":\s*"#/components/schemas/([^"]+)"`)

// converter builds the type converter of gvk from its schema and those it
// refers to, as the API server builds its own from the same schemas.
func (d *gvDoc) converter(gvk schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	root, ok := d.byKind[gvk.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: %w", gvk, errNoSchema)
	}
	schemas := map[string]*spec.Schema{}
	queue := []string{root}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, done := schemas[name]; done {
			continue
		}
		raw, ok := d.raw[name]
		if !ok {
			return nil, fmt.Errorf("the OpenAPI v3 schema of %s refers to %s, which it does not hold", gvk, name)
		}
		sch := &spec.Schema{}
		if err := json.Unmarshal(raw, sch); err != nil {
			return nil, fmt.Errorf("decoding the OpenAPI v3 schema %s of %s: %w", name, gvk, err)
		}
		schemas[name] = sch
		for _, m := range schemaRef.FindAllSubmatch(raw, -1) {
			queue = append(queue, string(m[1]))
		}
	}
	tc, err := managedfields.NewTypeConverter(schemas, false)
	if err != nil {
		return nil, fmt.Errorf("the OpenAPI v3 schema of %s: %w", gvk, err)
	}
	return tc, nil
}
