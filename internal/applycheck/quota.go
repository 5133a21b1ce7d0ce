package applycheck

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	rqadmission "k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/kubernetes/scheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the ResourceQuota check: the upgrade's writes and the pods
// it makes, counted against each namespace's quotas (their status: used
// and hard) in the order they happen, with the API server's own quota
// evaluators and its admission's decision (the resourcequota plugin's
// CheckRequest, request by request): first each object the apply
// creates or updates, in manifest order (a refusal fails Helm's upgrade
// half-way); then each rollout's pods as its controller makes them, the
// replaced pods' usage given back as the old pods go (a Deployment's
// surge first, with every old pod still there). A pod the quota refuses
// is never created: the rollout stalls.

// resourceQuotas is the resource of ResourceQuotas.
var resourceQuotas = schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}

func init() {
	manifestChecks = append(manifestChecks, checkQuota)
}

// QuotaExceeded is a write of the upgrade, or a pod it makes, that a
// ResourceQuota refuses.
type QuotaExceeded struct {
	Object string // Kind namespace/name
	// Pods: the refusal is of the pods the workload makes (else of the
	// object itself, at the apply).
	Pods bool
	Why  string // the quota admission's words: the quota, requested, used, limited
	// Adds is what the upgrade adds to that quota in all, at the end of
	// the rollout and at its peak ("pods: 2 at the end, 3 at the peak").
	Adds string
}

// Verdict is a refusal, whoever applies.
func (q QuotaExceeded) Verdict(Applier) (string, *values.Warning) { return q.String(), nil }

// String names the object, the quota admission's words and what the
// upgrade adds.
func (q QuotaExceeded) String() string {
	s := fmt.Sprintf("resource quota: %s: %s", q.Object, q.Why)
	if q.Pods {
		s += "; its controller cannot create those pods, so the rollout stalls"
	} else {
		s += "; Helm's upgrade would fail writing it, after writing the objects before it"
	}
	if q.Adds != "" {
		s += "; the upgrade adds " + q.Adds
	}
	return s
}

var (
	evaluatorsOnce sync.Once
	evaluators     quota.Registry
	evaluatorsErr  error
)

// quotaEvaluators are the API server's own evaluators (pods, services,
// claims, the object counts of its legacy names), built once; a resource
// without one is counted as count/<resource>.<group>.
func quotaEvaluators() (quota.Registry, error) {
	evaluatorsOnce.Do(func() {
		evs, err := core.NewEvaluators(nil, nil, func(gvr schema.GroupVersionResource) bool { return gvr.Resource != "resourceclaims" })
		evaluators, evaluatorsErr = generic.NewRegistry(evs), err
	})
	return evaluators, evaluatorsErr
}

func evaluatorFor(reg quota.Registry, gr schema.GroupResource) quota.Evaluator {
	if e := reg.Get(gr); e != nil {
		return e
	}
	return generic.NewObjectCountEvaluator(gr, nil, "")
}

// checkQuota reads the quotas of each namespace the upgrade writes to or
// makes pods in, and admits the upgrade's writes and pods against them.
func checkQuota(ctx context.Context, s Scope, res *Result) error {
	reg, err := quotaEvaluators()
	if err != nil {
		return fmt.Errorf("building the quota evaluators: %w", err)
	}
	quotas := map[string][]corev1.ResourceQuota{}
	read := func(ns string) (bool, error) {
		if _, ok := quotas[ns]; ok {
			return quotas[ns] != nil, nil
		}
		res.Requests++
		l, err := s.Checker.Reader.Dynamic.Resource(resourceQuotas).Namespace(ns).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err):
			quotas[ns] = nil
			res.NotChecked = append(res.NotChecked, fmt.Sprintf("ResourceQuotas of namespace %s: this process may not list them, to count the upgrade against them: %s",
				ns, listRuleIn(resourceQuotas, ns)))
			return false, nil
		case err != nil:
			return false, fmt.Errorf("listing the resource quotas of namespace %s: %w", ns, err)
		}
		qs := make([]corev1.ResourceQuota, len(l.Items))
		for i := range l.Items {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &qs[i]); err != nil {
				return false, fmt.Errorf("reading ResourceQuota %s/%s: %w", ns, l.Items[i].GetName(), err)
			}
		}
		quotas[ns] = qs
		return true, nil
	}
	// the apply's writes, in manifest order
	for _, o := range s.Read {
		ns := o.Want.GetNamespace()
		if o.Mapping == nil || ns == "" || o.Mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		if ok, err := read(ns); err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		if len(quotas[ns]) == 0 {
			continue
		}
		obj, old := typedOrNot(o.Want), runtime.Object(nil)
		op := admission.Create
		if o.Live != nil {
			op, old = admission.Update, typedOrNot(o.Live)
		}
		attr := admission.NewAttributesRecord(obj, old, o.Want.GroupVersionKind(), ns, o.Want.GetName(), o.Mapping.Resource, "", op, nil, false, nil)
		next, err := rqadmission.CheckRequest(quotas[ns], attr, evaluatorFor(reg, o.Mapping.Resource.GroupResource()), nil)
		if err != nil {
			res.Findings = append(res.Findings, QuotaExceeded{Object: o.Name(), Why: err.Error()})
			continue
		}
		quotas[ns] = next
	}
	// then the pods
	rollouts := s.rollouts()
	if len(rollouts) == 0 {
		return nil
	}
	pods, err := s.admittedPods(ctx, res)
	if err != nil {
		return err
	}
	podEvaluator := evaluatorFor(reg, corev1.Resource("pods"))
	for i, r := range rollouts {
		if pods[i].Refused != nil {
			continue // the LimitRange refuses them first
		}
		if ok, err := read(r.Namespace); err != nil || !ok || len(quotas[r.Namespace]) == 0 {
			if err != nil {
				return err
			}
			continue
		}
		f, err := rollOut(quotas, r, pods[i], podEvaluator)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Object, err)
		}
		if f != nil {
			res.Findings = append(res.Findings, *f)
		}
	}
	return nil
}

// rollOut admits r's pods against the quotas of its namespace as its
// controller makes them: a Deployment's surge first, then one new pod for
// each old one gone, then the old pods left go; for a workload without a
// surge each old pod goes before its new one. It updates quotas, and
// returns the first refusal.
func rollOut(quotas map[string][]corev1.ResourceQuota, r Rollout, p admittedPod, ev quota.Evaluator) (*QuotaExceeded, error) {
	ns := r.Namespace
	want := r.Replicas
	if r.Kind == "DaemonSet" || r.Kind == "Pod" {
		want = 1 // a DaemonSet's per node: judged for one; a Pod is one
	}
	old := r.OldReplicas
	if p.Old == nil {
		old = 0
	}
	surge := min(r.Surge, want)
	if r.Scale { // the pods there stay: only the added ones are made
		want, old, surge = max(0, want-r.OldReplicas), 0, 0
	}
	release := func() error {
		if old == 0 {
			return nil
		}
		old--
		return giveBack(quotas[ns], p.Old, ev)
	}
	admit := func() error {
		attr := admission.NewAttributesRecord(p.Pod, nil, api.Kind("Pod").WithVersion(""), ns, p.Pod.Name,
			api.Resource("pods").WithVersion(""), "", admission.Create, nil, false, nil)
		next, err := rqadmission.CheckRequest(quotas[ns], attr, ev, nil)
		if err != nil {
			return err
		}
		quotas[ns] = next
		return nil
	}
	var created int64
	fail := func(err error) *QuotaExceeded {
		return &QuotaExceeded{Object: r.Object, Pods: true, Why: fmt.Sprintf("pod %d of %d: %v", created+1, want, err), Adds: adds(r, p, ev, want, surge)}
	}
	for ; created < surge; created++ {
		if err := admit(); err != nil {
			return fail(err), nil
		}
	}
	for ; created < want; created++ {
		if surge == 0 {
			if err := release(); err != nil {
				return nil, err
			}
		}
		if err := admit(); err != nil {
			return fail(err), nil
		}
		if surge > 0 {
			if err := release(); err != nil {
				return nil, err
			}
		}
	}
	for old > 0 {
		if err := release(); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// giveBack takes an old pod's usage off each quota that counts it.
func giveBack(qs []corev1.ResourceQuota, pod *api.Pod, ev quota.Evaluator) error {
	usage, err := ev.Usage(pod)
	if err != nil {
		return err
	}
	for i := range qs {
		if ok, err := ev.Matches(&qs[i], pod); err != nil || !ok {
			continue
		}
		masked := quota.Mask(usage, quota.ResourceNames(qs[i].Status.Hard))
		qs[i].Status.Used = quota.SubtractWithNonNegativeResult(qs[i].Status.Used, masked)
	}
	return nil
}

// adds says what r adds to the quotas' resources, at the end of the
// rollout and at its peak: "pods +2 (peak +3), requests.cpu +400m".
func adds(r Rollout, p admittedPod, ev quota.Evaluator, want, surge int64) string {
	usage, err := ev.Usage(p.Pod)
	if err != nil {
		return ""
	}
	var oldUsage corev1.ResourceList
	old := r.OldReplicas
	if p.Old == nil || r.Scale {
		old = 0
	} else if oldUsage, err = ev.Usage(p.Old); err != nil {
		return ""
	}
	end, peak := corev1.ResourceList{}, corev1.ResourceList{}
	for range want {
		end = quota.Add(end, usage)
	}
	for range old {
		end = quota.Subtract(end, oldUsage)
	}
	peak = end.DeepCopy()
	if surge > 0 {
		peak = corev1.ResourceList{}
		for range surge {
			peak = quota.Add(peak, usage)
		}
	}
	names := quota.ResourceNames(quota.RemoveZeros(quota.Add(end, peak)))
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	var parts []string
	for _, n := range names {
		e, pk := end[n], peak[n]
		part := fmt.Sprintf("%s %s at the end", n, signed(&e))
		if pk.Cmp(e) > 0 {
			part += fmt.Sprintf(", %s at the peak", signed(&pk))
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

func signed(q *resource.Quantity) string {
	s := q.String()
	if !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// typedOrNot is u as its Go type where client-go's scheme knows its kind
// (the evaluators read a Service's type, a claim's size), else u itself
// (counted by kind alone).
func typedOrNot(u *unstructured.Unstructured) runtime.Object {
	obj, err := scheme.Scheme.New(u.GroupVersionKind())
	if err != nil {
		return u
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return u
	}
	return obj
}
