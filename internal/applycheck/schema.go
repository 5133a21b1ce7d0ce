package applycheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
)

// Schemas are the cluster's OpenAPI v3 schemas, as structured-merge-diff
// type converters, one per group-version, fetched once each
// (/openapi/v3 and its group-version documents, which Kubernetes' default
// system:discovery role lets every authenticated user read).
type Schemas struct {
	OpenAPI openapi.Client

	mu       sync.Mutex
	paths    map[string]openapi.GroupVersion
	pathsErr error
	byGV     map[schema.GroupVersion]*gvSchema
	// Requests counts the documents fetched.
	requests int
}

type gvSchema struct {
	once sync.Once
	tc   managedfields.TypeConverter
	err  error
}

// errNoSchema is the reason a kind cannot be checked: the cluster
// publishes no OpenAPI v3 schema for its group-version (an aggregated API
// that serves none, say).
var errNoSchema = errors.New("the cluster publishes no OpenAPI v3 schema for it")

// Converter is the type converter of gv.
func (s *Schemas) Converter(ctx context.Context, gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	s.mu.Lock()
	if s.byGV == nil {
		s.byGV = map[schema.GroupVersion]*gvSchema{}
	}
	e := s.byGV[gv]
	if e == nil {
		e = &gvSchema{}
		s.byGV[gv] = e
	}
	s.mu.Unlock()
	e.once.Do(func() { e.tc, e.err = s.fetch(ctx, gv) })
	return e.tc, e.err
}

// prefetch fetches, all at once, the schemas of the group-versions of the
// objects that exist (a fetch is mostly waiting for the API server).
func (s *Schemas) prefetch(ctx context.Context, objs []liveobjects.Object) {
	seen := map[schema.GroupVersion]bool{}
	var wg sync.WaitGroup
	for _, o := range objs {
		gv := o.Want.GroupVersionKind().GroupVersion()
		if o.Live == nil || seen[gv] {
			continue
		}
		seen[gv] = true
		wg.Go(func() { _, _ = s.Converter(ctx, gv) })
	}
	wg.Wait()
}

// fetched is how many documents were fetched (for the request count).
func (s *Schemas) fetched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Schemas) fetch(ctx context.Context, gv schema.GroupVersion) (managedfields.TypeConverter, error) {
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
	return typeConverter(gv, data)
}

// typeConverter builds the type converter of one group-version's OpenAPI
// v3 document, as the API server builds its own from the same schemas.
func typeConverter(gv schema.GroupVersion, data []byte) (managedfields.TypeConverter, error) {
	var spec spec3.OpenAPI
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("decoding the OpenAPI v3 schema of %s: %w", gv, err)
	}
	if spec.Components == nil || len(spec.Components.Schemas) == 0 {
		return nil, fmt.Errorf("%s: %w", gv, errNoSchema)
	}
	tc, err := managedfields.NewTypeConverter(spec.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("the OpenAPI v3 schema of %s: %w", gv, err)
	}
	return tc, nil
}

// builtIn says whether group is one of Kubernetes' own API groups (served
// by the API server itself, not by a CustomResourceDefinition).
func builtIn(group string) bool {
	return group == "" || !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}
