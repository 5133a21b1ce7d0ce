package applycheck

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Release is the release an upgrade renders, as the conflict check reads
// it.
type Release struct {
	// Target names the target in errors.
	Target string
	// Chart is the new chart; Values what it is rendered with (the merged
	// values, and for a HelmChart its HelmChartConfig's over them).
	Chart  *upgrade.Chart
	Values map[string]any
	// Name and Namespace are the release's.
	Name, Namespace string
	// Deployed is the manifest deployed now ("": unknown).
	Deployed string
	// CRDs are the CustomResourceDefinitions the upgrade applies before
	// the chart (upgrade.Change.CRDs).
	CRDs []map[string]any
}

// Conflicts is the conflict check of every kind: the new chart rendered
// as the release, the apply of each of its objects that exists computed
// from reads alone as a applies it (Check), and judged by a (Judge). The
// note says what was checked, how and why. Nothing is checked without a
// chart that renders (a restore).
func (c Checker) Conflicts(ctx context.Context, r Release, a Applier) (upgrade.Conflicts, error) {
	if r.Chart == nil || r.Chart.Manifest == nil {
		return upgrade.Conflicts{}, nil
	}
	req, err := request(r, a)
	if err != nil {
		return upgrade.Conflicts{}, err
	}
	start := time.Now()
	res, err := c.Check(ctx, req)
	if err != nil {
		return upgrade.Conflicts{}, fmt.Errorf("checking the upgrade of %s for field-manager conflicts: %w", r.Target, err)
	}
	out := upgrade.Conflicts{Note: fmt.Sprintf("%s; %s %s", res.Note(time.Since(start)), a.Name, a.method()), Changes: res.Changes}
	out.Refused, out.Warnings = Judge(res, a)
	return out, nil
}

// Recreate deletes, right before the apply, each object a.Recreate lists
// whose update the API server would refuse, leaving its dependents
// (DeleteForRecreate): computed again, as preflight computed it, since
// another process may have recreated it meanwhile. It returns the
// objects deleted.
func (c Checker) Recreate(ctx context.Context, r Release, a Applier) ([]string, error) {
	if len(a.Recreate) == 0 || r.Chart == nil || r.Chart.Manifest == nil {
		return nil, nil
	}
	req, err := request(r, a)
	if err != nil {
		return nil, err
	}
	res, err := c.Check(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("checking the objects apply.recreate lists: %w", err)
	}
	return c.DeleteForRecreate(ctx, res)
}

// request is the check of r's new chart applied as a says.
func request(r Release, a Applier) (Request, error) {
	manifest, err := r.Chart.Manifest(r.Values, r.Name, r.Namespace)
	if err != nil {
		return Request{}, err
	}
	req := Request{Manifest: manifest, Namespace: r.Namespace, Release: r.Name, Old: r.Deployed, Recreate: a.Recreate,
		Trace: func() (*provenance.Map, error) { return r.Chart.Traced(r.Values, r.Name, r.Namespace) }}
	for _, crd := range r.CRDs {
		req.CRDs = append(req.CRDs, &unstructured.Unstructured{Object: crd})
	}
	if a.PerObject {
		req.Fallback = a.Manager
	} else {
		req.Manager = a.Manager
	}
	return req, nil
}
