package applycheck

import (
	"context"
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file names the admission webhooks the upgrade's writes go
// through. What a webhook decides cannot be known before it is called;
// preflight says, per webhook, which objects of the upgrade it will be
// called for (its rules, namespace and object selectors matched as the
// API server matches them, with its own predicates), so that nothing
// passes it unseen.

// WarnWebhook: a webhook of the cluster will be called for objects of
// the upgrade, and preflight cannot judge what it answers.
const WarnWebhook values.WarningKind = "admission-webhook"

// The webhook configurations.
var (
	validatingWebhooks = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	mutatingWebhooks   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
)

func init() {
	manifestChecks = append(manifestChecks, checkWebhooks)
}

// WebhookCalled is one webhook the upgrade's writes go through.
type WebhookCalled struct {
	Webhook string   // "ValidatingWebhookConfiguration cfg: webhook name"
	Failure string   // its failurePolicy
	Objects []string // "Kind namespace/name (UPDATE)"
}

// Verdict is a warning, whoever applies.
func (w WebhookCalled) Verdict(Applier) (string, *values.Warning) {
	return "", &values.Warning{Kind: WarnWebhook, Path: w.Webhook, Message: w.String()}
}

// String says how many objects, which, and that preflight cannot judge.
func (w WebhookCalled) String() string {
	return fmt.Sprintf("%d objects of the upgrade go through admission webhook %s (failurePolicy %s): %s; preflight cannot judge what it answers",
		len(w.Objects), w.Webhook, w.Failure, joinFew(w.Objects))
}

// checkWebhooks lists the cluster's webhook configurations and matches
// each webhook against each write of the upgrade: a create or update of
// each object of the new chart, a delete of each object it drops.
func checkWebhooks(ctx context.Context, s Scope, res *Result) error {
	// the namespaces written to are read whether or not a webhook is
	// there to match their labels: the same reads in every cluster
	writes, lister, err := s.admissionWrites(ctx, res)
	if err != nil {
		return err
	}
	var hooks []webhook.WebhookAccessor
	kinds := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{validatingWebhooks, mutatingWebhooks} {
		res.Requests++
		l, err := s.Checker.Reader.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			res.NotChecked = append(res.NotChecked, fmt.Sprintf("admission webhooks: this process may not list %s, to name the webhooks the upgrade goes through: %s",
				gvr.Resource, clusterListRule(gvr)))
			continue
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for _, item := range l.Items {
			acc, err := webhookAccessors(gvr, item)
			if err != nil {
				return err
			}
			for _, a := range acc {
				kinds[a.GetUID()] = item.GetKind()
			}
			hooks = append(hooks, acc...)
		}
	}
	if len(hooks) == 0 {
		return nil
	}
	nsMatcher := namespace.Matcher{NamespaceLister: lister}
	called := map[string]*WebhookCalled{}
	var order []string
	for _, w := range writes {
		for _, h := range hooks {
			if rules.IsExemptAdmissionConfigurationResource(w.attr) {
				continue
			}
			if w.attr.GetNamespace() != "" && w.nsUnknown {
				// a namespace that does not exist: the missing namespace
				// check refuses the upgrade; no selector to match
			} else if ok, _ := nsMatcher.MatchNamespaceSelector(h, w.attr); !ok {
				continue
			}
			if ok, _ := (&object.Matcher{}).MatchObjectSelector(h, w.attr); !ok {
				continue
			}
			matched := false
			for _, r := range h.GetRules() {
				if (&rules.Matcher{Rule: r, Attr: w.attr}).Matches() {
					matched = true
					break
				}
			}
			if !matched {
				continue
			}
			key := h.GetUID()
			c, ok := called[key]
			if !ok {
				failure := "Fail"
				if fp := h.GetFailurePolicy(); fp != nil {
					failure = string(*fp)
				}
				c = &WebhookCalled{Webhook: fmt.Sprintf("%s %s: %s", kinds[key], h.GetConfigurationName(), h.GetName()), Failure: failure}
				called[key] = c
				order = append(order, key)
			}
			c.Objects = append(c.Objects, fmt.Sprintf("%s (%s)", w.name, w.attr.GetOperation()))
		}
	}
	sort.Strings(order)
	for _, k := range order {
		res.Findings = append(res.Findings, *called[k])
	}
	return nil
}

// webhookAccessors are the webhooks of one configuration.
func webhookAccessors(gvr schema.GroupVersionResource, item unstructured.Unstructured) ([]webhook.WebhookAccessor, error) {
	var out []webhook.WebhookAccessor
	if gvr == validatingWebhooks {
		var cfg admissionregistrationv1.ValidatingWebhookConfiguration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &cfg); err != nil {
			return nil, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", item.GetName(), err)
		}
		for i := range cfg.Webhooks {
			out = append(out, webhook.NewValidatingWebhookAccessor(fmt.Sprintf("%s/%s/%d", gvr.Resource, cfg.Name, i), cfg.Name, &cfg.Webhooks[i]))
		}
		return out, nil
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &cfg); err != nil {
		return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", item.GetName(), err)
	}
	for i := range cfg.Webhooks {
		out = append(out, webhook.NewMutatingWebhookAccessor(fmt.Sprintf("%s/%s/%d", gvr.Resource, cfg.Name, i), cfg.Name, &cfg.Webhooks[i]))
	}
	return out, nil
}

// admissionWrite is one write of the upgrade as admission sees it.
type admissionWrite struct {
	name      string // Kind namespace/name
	attr      admission.Attributes
	nsUnknown bool // its namespace does not exist, or could not be read
}

// admissionWrites are the upgrade's writes, as admission attributes
// (worked out once per check of a manifest): a create of each new object
// of a served kind, an update of each that exists, a delete of each the
// deployed revision has and the new chart does not; and a lister of the
// namespaces they are in, with their labels.
func (s Scope) admissionWrites(ctx context.Context, res *Result) ([]admissionWrite, corelisters.NamespaceLister, error) {
	type built struct {
		writes []admissionWrite
		lister corelisters.NamespaceLister
		err    error
	}
	b := s.Memo("admission-writes", func() any {
		indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		known := map[string]bool{}
		nsKnown := func(ns string) (bool, error) {
			if ok, seen := known[ns]; seen {
				return ok, nil
			}
			r := s.namespaceLabels(ctx, res, ns)
			if r.err != nil {
				return false, r.err
			}
			known[ns] = r.found
			if r.found {
				if err := indexer.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: r.labels}}); err != nil {
					return false, err
				}
			}
			return r.found, nil
		}
		var out []admissionWrite
		add := func(o, old *unstructured.Unstructured, gvr schema.GroupVersionResource, op admission.Operation) error {
			var obj, oldObj runtime.Object
			if o != nil {
				obj = o
			}
			if old != nil {
				oldObj = old
			}
			src := o
			if src == nil {
				src = old
			}
			w := admissionWrite{name: fmt.Sprintf("%s %s", src.GetKind(), objectName(src)),
				attr: admission.NewAttributesRecord(obj, oldObj, src.GroupVersionKind(), src.GetNamespace(), src.GetName(), gvr, "", op, nil, false, nil)}
			if ns := src.GetNamespace(); ns != "" {
				ok, err := nsKnown(ns)
				if err != nil {
					return err
				}
				w.nsUnknown = !ok
			}
			out = append(out, w)
			return nil
		}
		kept := map[string]bool{}
		for _, o := range s.Read {
			kept[identity(o.Want, s.Request.Namespace)] = true
			if o.Mapping == nil {
				continue // a kind not served yet: a CRD of the chart's
			}
			op := admission.Create
			if o.Live != nil {
				op = admission.Update
			}
			if err := add(o.Want, o.Live, o.Mapping.Resource, op); err != nil {
				return built{err: err}
			}
		}
		for _, old := range s.Olds {
			if kept[identity(old, s.Request.Namespace)] {
				continue
			}
			m, err := s.Checker.Reader.Mapper.RESTMapping(old.GroupVersionKind().GroupKind(), old.GroupVersionKind().Version)
			if err != nil {
				continue // a kind no longer served: nothing to delete through admission
			}
			o := old.DeepCopy()
			if m.Scope.Name() == meta.RESTScopeNameNamespace && o.GetNamespace() == "" {
				o.SetNamespace(s.Request.Namespace)
			}
			if err := add(nil, o, m.Resource, admission.Delete); err != nil {
				return built{err: err}
			}
		}
		return built{writes: out, lister: corelisters.NewNamespaceLister(indexer)}
	}).(built)
	return b.writes, b.lister, b.err
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// clusterListRule is the RBAC rule that lets this process list gvr
// cluster-wide.
func clusterListRule(gvr schema.GroupVersionResource) string {
	return fmt.Sprintf(`add to a ClusterRole the rule {apiGroups: [%q], resources: [%s], verbs: [list]}`, gvr.Group, gvr.Resource)
}
