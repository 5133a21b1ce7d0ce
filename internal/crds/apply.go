package crds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/csaupgrade"
)

// apply is the server-side apply of crd as manager; a dry run with
// dryRun. Only a dry run forces (the server's verdict on a CRD whose
// installer's fields the apply hands over first).
func (c *Client) apply(ctx context.Context, crd CRD, manager string, force, dryRun bool) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(crd.Object.Object)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: manager, FieldValidation: "Strict"}
	if force {
		opts.Force = &force
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.Dynamic.Resource(GVR).Patch(ctx, crd.Name(), types.ApplyPatchType, data, opts)
}

// conflictRE is a manager in the API server's words of a field-manager
// conflict: `conflict with "helm" using apiextensions.k8s.io/v1`.
var conflictRE = regexp.MustCompile(`conflicts? with "([^"]+)"`)

// conflictManagers are the managers a conflict error names.
func conflictManagers(err error) []string {
	var out []string
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	for _, cause := range status.Status().Details.Causes {
		if m := conflictRE.FindStringSubmatch(cause.Message); m != nil && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func subset(some, of []string) bool {
	for _, s := range some {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

// handOver hands the client-side (Update) fields of the installers d
// names over to d's manager, as Helm 4 hands its own over (csaupgrade):
// one JSON patch of managedFields, conditional on the resourceVersion
// read. Nothing when d names none or nothing is left to hand over.
func (c *Client) handOver(ctx context.Context, crd CRD, d Decision) error {
	if len(d.Handover) == 0 {
		return nil
	}
	live, err := c.Dynamic.Resource(GVR).Get(ctx, crd.Name(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading CustomResourceDefinition %s: %w", crd.Name(), err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(d.Handover...), d.Manager)
	if err != nil || patch == nil {
		return err
	}
	if _, err := c.Dynamic.Resource(GVR).Patch(ctx, crd.Name(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: d.Manager}); err != nil {
		return fmt.Errorf("handing the client-side fields of %s on CustomResourceDefinition %s over to %s: %w", strings.Join(d.Handover, ", "), crd.Name(), d.Manager, err)
	}
	c.log().Info("CRD fields handed over", "crd", crd.Name(), "from", strings.Join(d.Handover, ", "), "to", d.Manager)
	return nil
}

// refusal is the API server's refusal of the apply of name, in its words,
// with the way out where there is one.
func refusal(err error, name, manager string) string {
	switch {
	case apierrors.IsConflict(err):
		return fmt.Sprintf("%v: another field manager owns these fields of the CRD, and chart-upgrader never forces a CRD: "+
			"when that manager's values are to go, hand its fields over once by hand (kubectl apply --server-side --force-conflicts --field-manager=%s -f the chart's file), "+
			"or make the chart's values the other manager's", err, manager)
	case apierrors.IsForbidden(err):
		return forbidden(err, "patch", name)
	}
	return err.Error()
}

// forbidden is a refusal of verb on the CRD name, naming the rule.
func forbidden(err error, verb, name string) string {
	return fmt.Sprintf("%v: the process may not %s it: grant %s (and create) on customresourcedefinitions, resourceNames [%s] "+
		"(plan --check-chart with --check-crds derives the rules)", err, verb, verb, name)
}

// Apply applies the CRDs of cs that ds (Check's verdicts, in the same
// order) create or replace, and waits until each is Established. It
// applies nothing when any verdict is a refusal. It returns the verdicts
// it carried out.
func (c *Client) Apply(ctx context.Context, cs []CRD, ds []Decision) ([]Decision, error) {
	if len(cs) != len(ds) {
		return nil, fmt.Errorf("applying CRDs: %d verdicts for %d CRDs", len(ds), len(cs))
	}
	for _, d := range ds {
		if d.Action == ActionRefused {
			return nil, fmt.Errorf("applying CRDs: %s", d.Refused[0])
		}
	}
	applied := make([]bool, len(cs))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, crd := range cs {
		if a := ds[i].Action; a != ActionCreate && a != ActionReplace && a != ActionMigrate {
			continue
		}
		g.Go(func() error {
			if err := c.handOver(ctx, crd, ds[i]); err != nil {
				return err
			}
			if ds[i].Action == ActionMigrate {
				if err := c.migrate(ctx, crd, ds[i]); err != nil {
					return fmt.Errorf("migrating CustomResourceDefinition %s (%s): %w", crd.Name(), crd.From, err)
				}
			}
			if _, err := c.apply(ctx, crd, ds[i].Manager, false, false); err != nil {
				return fmt.Errorf("applying CustomResourceDefinition %s (%s): %s", crd.Name(), crd.From, refusal(err, crd.Name(), ds[i].Manager))
			}
			applied[i] = true
			return c.ready(ctx, crd)
		})
	}
	err := g.Wait()
	var done []Decision
	for i, d := range ds {
		if applied[i] {
			done = append(done, d)
		}
	}
	if len(done) > 0 && c.Applied != nil {
		c.Applied()
	}
	return done, err
}

// ready waits until crd is Established and the API server answers at
// each version crd serves: an update that adds a version finds the CRD
// Established already, while the API server's handler of the new version
// may not answer yet (404 for a moment).
func (c *Client) ready(ctx context.Context, crd CRD) error {
	if err := c.established(ctx, crd.Name()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, EstablishTimeout)
	defer cancel()
	for _, v := range crd.Typed.Spec.Versions {
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Typed.Spec.Group, Version: v.Name, Resource: crd.Typed.Spec.Names.Plural}
		for delay := 10 * time.Millisecond; ; delay = min(2*delay, time.Second) {
			_, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err == nil || !apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CustomResourceDefinition %s is Established, but the API server does not serve %s after %s", crd.Name(), gvr.GroupVersion(), EstablishTimeout)
			case <-time.After(delay):
			}
		}
	}
	return nil
}

// established waits until the CRD name is Established (its names
// accepted and its kind served), watching it.
func (c *Client) established(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, EstablishTimeout)
	defer cancel()
	beat := c.Heartbeat
	if beat <= 0 {
		beat = 10 * time.Second
	}
	start := time.Now()
	ticker := time.NewTicker(beat)
	defer ticker.Stop()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	for {
		list, err := c.Dynamic.Resource(GVR).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fmt.Errorf("waiting for CustomResourceDefinition %s to be Established: %w", name, err)
		}
		if len(list.Items) == 1 && isEstablished(&list.Items[0]) {
			return nil
		}
		w, err := c.Dynamic.Resource(GVR).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			return fmt.Errorf("waiting for CustomResourceDefinition %s to be Established: %w", name, err)
		}
		ok, err := c.watchEstablished(ctx, w, ticker, start, name)
		w.Stop()
		if ok || err != nil {
			return err
		}
	}
}

// watchEstablished follows w until the CRD is Established (true), the
// watch ends (false: list again) or ctx does.
func (c *Client) watchEstablished(ctx context.Context, w watch.Interface, ticker *time.Ticker, start time.Time, name string) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("CustomResourceDefinition %s is not Established after %s: see its status.conditions", name, time.Since(start).Round(time.Second))
		case <-ticker.C:
			c.log().Info("waiting for the CRD to be Established", "crd", name, "waited", time.Since(start).Round(time.Second).String())
		case ev, open := <-w.ResultChan():
			if !open {
				return false, nil
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Error && isEstablished(u) {
				return true, nil
			}
		}
	}
}

// isEstablished reads the Established condition.
func isEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == string(apiextv1.Established) && m["status"] == string(apiextv1.ConditionTrue) {
			return true
		}
	}
	return false
}
