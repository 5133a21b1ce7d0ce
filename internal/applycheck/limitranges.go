package applycheck

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the LimitRange check: each pod the upgrade makes
// (pods.go), defaulted as the API server defaults it, gets its
// namespace's LimitRange defaults and is validated against their
// min, max and ratios, per container and per pod, with the LimitRanger
// admission plugin's own functions. A pod it refuses is never created:
// the rollout stalls. The defaulted pods are also what the quota check
// counts.

// limitRanges is the resource of LimitRanges.
var limitRanges = schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}

func init() {
	manifestChecks = append(manifestChecks, checkLimitRanges)
}

// LimitRangeRefusal is a workload whose pods a LimitRange refuses.
type LimitRangeRefusal struct {
	Object string // Kind namespace/name
	Why    string // the plugin's words
}

// Verdict is a refusal, whoever applies.
func (l LimitRangeRefusal) Verdict(Applier) (string, *values.Warning) { return l.String(), nil }

// String names the workload and the plugin's refusal.
func (l LimitRangeRefusal) String() string {
	return fmt.Sprintf("limit range: %s: every pod it makes is refused: %s; the workload is taken and its rollout never starts", l.Object, l.Why)
}

// admittedPod is the pod of one rollout as admission sees it once the
// LimitRanger has run: defaulted, in the API server's internal form,
// with its namespace's LimitRange defaults; Refused is the plugin's
// refusal. Old is the pod of the template the rollout replaces, nil for
// a new workload.
type admittedPod struct {
	Pod, Old *api.Pod
	Refused  error
}

// checkLimitRanges reports the rollouts whose pods a LimitRange refuses.
func checkLimitRanges(ctx context.Context, s Scope, res *Result) error {
	pods, err := s.admittedPods(ctx, res)
	if err != nil {
		return err
	}
	for i, r := range s.rollouts() {
		if p := pods[i]; p.Refused != nil {
			res.Findings = append(res.Findings, LimitRangeRefusal{Object: r.Object, Why: p.Refused.Error()})
		}
	}
	return nil
}

// admittedPods are the rollouts' pods after the LimitRanger, in their
// order, worked out once per check of a manifest. A namespace whose
// LimitRanges this process may not list is named in res.NotChecked, and
// its pods are taken without their defaults.
func (s Scope) admittedPods(ctx context.Context, res *Result) ([]admittedPod, error) {
	type built struct {
		pods []admittedPod
		err  error
	}
	b := s.Memo("admitted-pods", func() any {
		rollouts := s.rollouts()
		out := make([]admittedPod, len(rollouts))
		ranges := map[string][]corev1.LimitRange{}
		unread := map[string]bool{}
		for i, r := range rollouts {
			if _, ok := ranges[r.Namespace]; !ok && !unread[r.Namespace] {
				res.Requests++
				l, err := s.Checker.Reader.Dynamic.Resource(limitRanges).Namespace(r.Namespace).List(ctx, metav1.ListOptions{})
				switch {
				case apierrors.IsForbidden(err):
					unread[r.Namespace] = true
					res.NotChecked = append(res.NotChecked, fmt.Sprintf("LimitRanges of namespace %s: this process may not list them, to judge the pods the upgrade makes there: %s",
						r.Namespace, listRuleIn(limitRanges, r.Namespace)))
				case err != nil:
					return built{err: fmt.Errorf("listing the limit ranges of namespace %s: %w", r.Namespace, err)}
				default:
					ranges[r.Namespace] = make([]corev1.LimitRange, len(l.Items))
					for j := range l.Items {
						if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[j].Object, &ranges[r.Namespace][j]); err != nil {
							return built{err: fmt.Errorf("reading LimitRange %s/%s: %w", r.Namespace, l.Items[j].GetName(), err)}
						}
					}
				}
			}
			pod, refused, err := limitRanged(r.Pod(), ranges[r.Namespace])
			if err != nil {
				return built{err: fmt.Errorf("%s: %w", r.Object, err)}
			}
			out[i] = admittedPod{Pod: pod, Refused: refused}
			if r.Old != nil {
				old := r
				old.Template = r.Old
				if out[i].Old, _, err = limitRanged(old.Pod(), ranges[r.Namespace]); err != nil {
					return built{err: fmt.Errorf("%s: %w", r.Object, err)}
				}
			}
		}
		return built{pods: out}
	}).(built)
	return b.pods, b.err
}

// limitRanged is pod defaulted and converted as the API server does,
// then given the defaults of ranges and validated against them as the
// LimitRanger plugin does; refused is the plugin's refusal.
func limitRanged(pod *corev1.Pod, ranges []corev1.LimitRange) (*api.Pod, error, error) {
	legacyscheme.Scheme.Default(pod)
	internal := &api.Pod{}
	if err := legacyscheme.Scheme.Convert(pod, internal, nil); err != nil {
		return nil, nil, fmt.Errorf("converting its pod template: %w", err)
	}
	attr := admission.NewAttributesRecord(internal, nil, api.Kind("Pod").WithVersion(""), internal.Namespace, internal.Name,
		api.Resource("pods").WithVersion(""), "", admission.Create, nil, false, nil)
	for i := range ranges {
		if err := limitranger.PodMutateLimitFunc(&ranges[i], internal); err != nil {
			return internal, admission.NewForbidden(attr, err), nil
		}
	}
	for i := range ranges {
		if err := limitranger.PodValidateLimitFunc(&ranges[i], internal); err != nil {
			return internal, admission.NewForbidden(attr, err), nil
		}
	}
	return internal, nil, nil
}

// listRuleIn is the RBAC rule that lets this process list gvr in ns.
func listRuleIn(gvr schema.GroupVersionResource, ns string) string {
	return fmt.Sprintf(`add to a Role in namespace %s the rule {apiGroups: [%q], resources: [%s], verbs: [list]}`, ns, gvr.Group, gvr.Resource)
}
