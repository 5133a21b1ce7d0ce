package applycheck

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is how a check plugs into preflight. A check is one file: a
// type for what it finds, with its Verdict, and an init that registers
// the check, as a manifestCheck (it looks at the whole new manifest and
// what was read of it) or an objectCheck (it looks at one object as the
// apply would store it). Check runs every registered check; Judge asks
// each finding how it counts for the applier. Adding a check touches no
// other file.

// Finding is one thing a check found about the upgrade's objects.
type Finding interface {
	// Verdict is how the finding counts for an apply made as a: a
	// refusal (one line, the cause and the way out), or a warning; one
	// of the two.
	Verdict(a Applier) (refusal string, warning *values.Warning)
}

// Scope is what a check sees.
type Scope struct {
	Checker Checker
	Request Request
	// Objects are the new chart's objects, in manifest order; Read the
	// same, each as read from the cluster (its live copy, its mapping,
	// why it could not be read).
	Objects []*unstructured.Unstructured
	Read    []liveobjects.Object
	// Olds are the objects of the deployed manifest (Request.Old).
	Olds []*unstructured.Unstructured

	memo *sync.Map // Memo's: key → *memoized
}

// memoized is one value of Memo, built once.
type memoized struct {
	once  sync.Once
	value any
}

// Memo is what build gives for key, built once in a check of a manifest
// however many objects ask at once: the work a check does once per kind
// (a schema compiled).
func (s Scope) Memo(key any, build func() any) any {
	if s.memo == nil {
		return build()
	}
	m, _ := s.memo.LoadOrStore(key, &memoized{})
	one := m.(*memoized)
	one.once.Do(func() { one.value = build() })
	return one.value
}

// memoized is what Memo built for key, if it did: a manifest check's
// reads, for the object checks, which run after every manifest check.
func (s Scope) memoized(key any) (any, bool) {
	if s.memo == nil {
		return nil, false
	}
	m, ok := s.memo.Load(key)
	if !ok {
		return nil, false
	}
	return m.(*memoized).value, true
}

// A manifestCheck looks at the whole new manifest: it adds what it finds
// to res (Findings; NotChecked, for what it could not see; Requests, for
// the API requests it made). An error ends the check (the cluster could
// not be asked).
type manifestCheck func(ctx context.Context, s Scope, res *Result) error

// An objectCheck judges one object of the new chart as the apply would
// store it (stored: the apply merged with o.Live, or the object created
// when o.Live is nil): a Finding, or nil. It runs beside the others, on
// as many objects at once as there are CPUs, and may not write to s.
type objectCheck func(ctx context.Context, s Scope, o liveobjects.Object, stored *unstructured.Unstructured) Finding

// The registered checks: each file's init adds its own. They run, and
// their findings are listed, in the order of their files' names (the
// order in which Go runs a package's inits).
var (
	manifestChecks []manifestCheck
	objectChecks   []objectCheck
)

// FindingsOf are the findings of type T among fs, in order.
func FindingsOf[T Finding](fs []Finding) []T {
	var out []T
	for _, f := range fs {
		if t, ok := f.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
