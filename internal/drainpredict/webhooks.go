package drainpredict

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// webhooksRule asks the API server itself: where an admission webhook
// intercepts pods/eviction, each pod the drain evicts is asked a dry-run
// eviction (dryRun=All: admission runs, nothing is written; webhooks
// declare sideEffects None or NoneOnDryRun to be called on one). A
// webhook's refusal is a blocker, with its words: a 429 is retried by
// kubectl every 5 s until the webhook allows, any other code gives the
// pod up at once. The budgets' own 429 and 500 are the budget rule's. A
// webhook that could not be asked (no RBAC for pods/eviction, or one
// that does not take dry runs) is named in NotChecked.
type webhooksRule struct{}

func (webhooksRule) Name() string { return "webhook" }

func (webhooksRule) Reads() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}}, // dry runs only
	}
}

// dryRunJobs is how many dry-run evictions are asked at once.
const dryRunJobs = 16

func (webhooksRule) Judge(ctx context.Context, w *World, p *Prediction) error {
	if w.opts.Drain.DisableEviction {
		return nil
	}
	var pods []*corev1.Pod
	for i := range w.Evict {
		if !w.moved[w.Evict[i].UID] {
			pods = append(pods, &w.Evict[i])
		}
	}
	if len(pods) == 0 {
		return nil
	}
	hooks, err := evictionWebhooks(ctx, w)
	if err != nil || len(hooks) == 0 {
		return err
	}
	var mu sync.Mutex
	notAsked := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(dryRunJobs)
	for _, pod := range pods {
		g.Go(func() error {
			w.requests.Add(1)
			err := w.c.Kube.PolicyV1().Evictions(pod.Namespace).Evict(gctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
				DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
			})
			a := judgeDryRun(err, hooks)
			mu.Lock()
			defer mu.Unlock()
			if a.notAsked != "" {
				notAsked[a.notAsked] = true
			}
			if a.refusal != nil {
				a.refusal.Pod, a.refusal.Owner = podName(pod), ownerOf(pod)
				p.block(*a.refusal)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for why := range notAsked {
		w.notCheck("eviction webhooks %s not asked: %s", strings.Join(hooks, ", "), why)
	}
	return nil
}

// evictionWebhooks names the admission webhooks whose rules intercept
// the creation of pods/eviction.
func evictionWebhooks(ctx context.Context, w *World) ([]string, error) {
	var out []string
	w.requests.Add(1)
	vs, err := w.c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		w.notCheck("eviction webhooks not asked: this process may not list validatingwebhookconfigurations")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the validating webhooks: %w", err)
	}
	for _, c := range vs.Items {
		for _, h := range c.Webhooks {
			if interceptsEviction(h.Rules) {
				out = append(out, h.Name)
			}
		}
	}
	w.requests.Add(1)
	ms, err := w.c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, c := range ms.Items {
			for _, h := range c.Webhooks {
				if interceptsEviction(h.Rules) {
					out = append(out, h.Name)
				}
			}
		}
	} else if !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing the mutating webhooks: %w", err)
	}
	return out, nil
}

// interceptsEviction: a rule covers CREATE of pods/eviction in the core
// group ("*/*" and "pods/*" cover subresources; "*" does not).
func interceptsEviction(rules []admissionv1.RuleWithOperations) bool {
	for _, r := range rules {
		ops := slices.ContainsFunc(r.Operations, func(o admissionv1.OperationType) bool {
			return o == admissionv1.Create || o == admissionv1.OperationAll
		})
		group := slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")
		res := slices.ContainsFunc(r.Resources, func(s string) bool { return s == "pods/eviction" || s == "pods/*" || s == "*/*" })
		if ops && group && res {
			return true
		}
	}
	return false
}

// dryRunAnswer is what a dry-run eviction says of the webhooks: a
// refusal, or why they could not be asked; neither when the eviction was
// allowed, the pod is gone, or the answer is a budget's.
type dryRunAnswer struct {
	refusal  *Finding
	notAsked string
}

// judgeDryRun reads a dry-run eviction's answer.
func judgeDryRun(err error, hooks []string) dryRunAnswer {
	if err == nil || apierrors.IsNotFound(err) {
		return dryRunAnswer{}
	}
	msg := err.Error()
	if apierrors.IsForbidden(err) && !strings.Contains(msg, "admission webhook") && !strings.Contains(msg, "disruption budget") {
		return dryRunAnswer{notAsked: "this process may not create pods/eviction (a dry run needs the create verb on it): " + msg}
	}
	if strings.Contains(msg, "does not support dry run") {
		return dryRunAnswer{notAsked: msg}
	}
	if !strings.Contains(msg, "admission webhook") {
		return dryRunAnswer{} // the budget's answer: the budget rule's
	}
	hook := ""
	for _, h := range hooks {
		if strings.Contains(msg, `"`+h+`"`) {
			hook = h
		}
	}
	f := &Finding{Rule: "webhook", Unblock: "meet the webhook's condition, or ask its owner"}
	if apierrors.IsTooManyRequests(err) {
		f.Why = fmt.Sprintf("admission webhook %s refuses the eviction for now (429; kubectl retries every 5 s until it allows): %s", hook, msg)
	} else {
		f.Why = fmt.Sprintf("admission webhook %s refuses the eviction (%d; kubectl gives the pod up at once): %s", hook, codeOf(err), msg)
	}
	return dryRunAnswer{refusal: f}
}

func codeOf(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}
