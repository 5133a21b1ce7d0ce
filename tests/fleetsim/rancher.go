package fleetsim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The ManagedChart spec fields Rancher copies into the Bundle: Helm options
// go to spec.helm, the rest to the top of the Bundle spec.
var (
	helmFields   = []string{"chart", "version", "releaseName", "values", "timeoutSeconds", "maxHistory", "force", "takeOwnership"}
	bundleFields = []string{"defaultNamespace", "namespace", "serviceAccount", "paused", "targets", "rolloutStrategy", "diff"}
)

// syncManagedChart is Rancher's ManagedChart handler: it writes Bundle
// mcc-<name> from the ManagedChart, or deletes it with the ManagedChart.
func (s *Sim) syncManagedChart(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	bundles := s.client.Resource(BundlesGVR).Namespace(ns)
	mc, exists := s.fresh.get(ManagedChartsGVR, s.mcs, k)
	if !exists {
		s.setDefined(k, "")
		err := bundles.Delete(ctx, BundleName(name), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Bundle %s/%s of a deleted ManagedChart: %w", ns, BundleName(name), err)
		}
		return nil
	}
	spec, _, _ := unstructured.NestedMap(mc.Object, "spec")
	if problem := s.checkChart(ctx, spec); problem != "" {
		s.setDefined(k, problem)
		if err := s.writeManagedChartStatus(ctx, ns, name, s.bundleStatusOf(ns, name), false); err != nil {
			return err
		}
		return fmt.Errorf("ManagedChart %s: %s", k, problem)
	}
	s.setDefined(k, "")
	defer s.bundleQueue.Add(key(ns, BundleName(name))) // refreshes the Defined condition
	desired := bundleSpec(spec)

	b, exists := s.fresh.get(BundlesGVR, s.bundles, key(ns, BundleName(name)))
	if !exists {
		b := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": BundlesGVR.GroupVersion().String(),
			"kind":       "Bundle",
			"metadata": map[string]any{
				"name": BundleName(name), "namespace": ns,
				"annotations": map[string]any{annOwnerGVK: ownerGVK, annOwnerName: name, annOwnerNamespace: ns},
			},
			"spec": desired,
		}}
		got, err := bundles.Create(ctx, b, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Bundle %s/%s: %w", ns, BundleName(name), err)
		}
		s.fresh.wrote(BundlesGVR, got)
		return nil
	}
	if old, _, _ := unstructured.NestedMap(b.Object, "spec"); equality.Semantic.DeepEqual(old, desired) {
		return nil
	}
	// Rancher's handler copies the Bundle status it has (the old one) into
	// the ManagedChart before it applies the new Bundle spec
	if err := s.writeManagedChartStatus(ctx, ns, name, s.bundleStatusOf(ns, name), false); err != nil {
		return err
	}
	b = b.DeepCopy()
	b.Object["spec"] = desired
	got, err := bundles.Update(ctx, b, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating Bundle %s/%s: %w", ns, BundleName(name), err)
	}
	s.fresh.wrote(BundlesGVR, got)
	return nil
}

// checkChart says why the chart of a ManagedChart spec cannot be fetched,
// or "" when it can.
func (s *Sim) checkChart(ctx context.Context, spec map[string]any) string {
	name, _ := spec["chart"].(string)
	version, _ := spec["version"].(string)
	if name == "" || version == "" {
		return "spec.chart and spec.version must be set"
	}
	ch, err := s.opts.Loader(ctx, name, version)
	if err != nil {
		return fmt.Sprintf("fetching chart %s %s: %v", name, version, err)
	}
	if ch.Metadata == nil || ch.Metadata.Name != name || ch.Metadata.Version != version {
		return fmt.Sprintf("fetching chart %s %s: the loader returned another chart", name, version)
	}
	return ""
}

// bundleSpec is the Bundle spec Rancher writes for a ManagedChart spec.
func bundleSpec(mc map[string]any) map[string]any {
	helm := map[string]any{}
	for _, f := range helmFields {
		if v, ok := mc[f]; ok && v != nil {
			helm[f] = runtime.DeepCopyJSONValue(v)
		}
	}
	out := map[string]any{"helm": helm}
	for _, f := range bundleFields {
		if v, ok := mc[f]; ok && v != nil {
			out[f] = runtime.DeepCopyJSONValue(v)
		}
	}
	return out
}

func (s *Sim) setDefined(k, problem string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if problem == "" {
		delete(s.defined, k)
	} else {
		s.defined[k] = problem
	}
}

func (s *Sim) definedProblem(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defined[k]
}

// bundleStatusOf is the cached status of the Bundle of a ManagedChart.
func (s *Sim) bundleStatusOf(ns, name string) map[string]any {
	b, exists := s.fresh.get(BundlesGVR, s.bundles, key(ns, BundleName(name)))
	if !exists {
		return nil
	}
	st, _, _ := unstructured.NestedMap(b.Object, "status")
	return st
}

// writeManagedChartStatus sets the ManagedChart status to bundleStatus plus
// a Defined condition, when that changes it. ready says the Bundle status
// reports the chart ready.
func (s *Sim) writeManagedChartStatus(ctx context.Context, ns, name string, bundleStatus map[string]any, ready bool) error {
	mc, exists := s.fresh.get(ManagedChartsGVR, s.mcs, key(ns, name))
	if !exists {
		return nil
	}
	old, _, _ := unstructured.NestedMap(mc.Object, "status")
	oldConds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")

	status := runtime.DeepCopyJSON(bundleStatus)
	if status == nil {
		status = map[string]any{}
	}
	conds, _ := status["conditions"].([]any)
	defined := condition{Type: "Defined", Status: "True"}
	if problem := s.definedProblem(key(ns, name)); problem != "" {
		defined = condition{Type: "Defined", Status: "False", Reason: "Error", Message: problem}
		ready = false
	}
	merged, err := toMap(&struct {
		C []condition `json:"c"`
	}{mergeConditions(oldConds, []condition{defined}, time.Now())})
	if err != nil {
		return err
	}
	extra, _ := merged["c"].([]any)
	status["conditions"] = append(conds, extra...)
	if equality.Semantic.DeepEqual(old, status) {
		return nil
	}
	mc = mc.DeepCopy()
	mc.Object["status"] = status
	undo := s.recordReady(ns, name, false, ready)
	got, err := s.client.Resource(ManagedChartsGVR).Namespace(ns).UpdateStatus(ctx, mc, metav1.UpdateOptions{})
	if err != nil {
		undo()
		return fmt.Errorf("writing the status of ManagedChart %s/%s: %w", ns, name, err)
	}
	s.fresh.wrote(ManagedChartsGVR, got)
	s.log.Debug("wrote ManagedChart status", "managedChart", ns+"/"+name, "ready", ready)
	return nil
}
