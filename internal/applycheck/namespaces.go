package applycheck

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the check of the namespaces the new chart's objects go
// into: Helm does not create one (only --create-namespace, on install, for
// the release's), so an object in a namespace that does not exist fails
// the upgrade ("namespaces … not found").

// namespaces is the resource of Namespaces.
var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

func init() {
	manifestChecks = append(manifestChecks, func(ctx context.Context, s Scope, res *Result) error {
		missing, notChecked, asked, err := s.Checker.missingNamespaces(ctx, s.Read, s.Objects, s.Request.Namespace)
		res.Requests += asked
		if err != nil {
			return err
		}
		for _, m := range missing {
			res.Findings = append(res.Findings, m)
		}
		res.NotChecked = append(res.NotChecked, notChecked...)
		return nil
	})
}

// Missing is a namespace an object of the new chart goes into that the
// cluster does not have and the chart does not create.
type Missing struct {
	Namespace string
	Objects   []string // the chart's objects in it, Kind namespace/name
}

// Verdict is a refusal, whoever applies.
func (m Missing) Verdict(Applier) (string, *values.Warning) { return m.String(), nil }

// String is the refusal: the namespace, its objects, the way out.
func (m Missing) String() string {
	return fmt.Sprintf("missing namespace: %s does not exist, and the chart does not create it: Helm's upgrade would fail creating %s (namespaces %q not found); create the namespace first",
		m.Namespace, joinFew(m.Objects), m.Namespace)
}

// missingNamespaces reads each namespace the new objects of read go into
// (those with no live copy, namespaced, read or not), other than release's own, which
// holds the release, and those a Namespace object of objs creates, or that
// holds one of read's live objects. A namespace this process may not read
// is named in notChecked with the rule to add. It returns the requests made.
func (c Checker) missingNamespaces(ctx context.Context, read []liveobjects.Object, objs []*unstructured.Unstructured, release string) (missing []Missing, notChecked []string, requests int, err error) {
	known := map[string]bool{release: true}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" {
			known[o.GetName()] = true
		}
	}
	for _, o := range read {
		if o.Live != nil {
			known[o.Want.GetNamespace()] = true
		}
	}
	var order []string
	byNamespace := map[string][]string{}
	for _, o := range read {
		ns := o.Want.GetNamespace()
		// an object that could not be read may be new too (a Role in a
		// namespace that does not exist cannot be granted)
		if o.Live != nil || o.Mapping == nil || o.Mapping.Scope.Name() != meta.RESTScopeNameNamespace || known[ns] {
			continue
		}
		if _, ok := byNamespace[ns]; !ok {
			order = append(order, ns)
		}
		byNamespace[ns] = append(byNamespace[ns], o.Name())
	}
	slices.Sort(order)
	for _, ns := range order {
		requests++
		_, err := c.Reader.Dynamic.Resource(namespaces).Get(ctx, ns, metav1.GetOptions{})
		switch {
		case err == nil:
		case apierrors.IsNotFound(err):
			missing = append(missing, Missing{Namespace: ns, Objects: byNamespace[ns]})
		case apierrors.IsForbidden(err):
			notChecked = append(notChecked, fmt.Sprintf("Namespace %s: this process may not read it, to know it exists: %s", ns, liveobjects.Rule(namespaces, "", ns, "get")))
		default:
			return nil, nil, requests, fmt.Errorf("reading namespace %s: %w", ns, err)
		}
	}
	return missing, notChecked, requests, nil
}

// joinFew is up to three names, and how many more.
func joinFew(names []string) string {
	if len(names) <= 3 {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:3], len(names)-3)
}
