package applycheck

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	admissiondefaults "k8s.io/kubernetes/pkg/apis/admissionregistration/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the ValidatingAdmissionPolicy check: the cluster's
// policies and their bindings (admissionregistration.k8s.io/v1), params
// included, evaluated on each object as the apply would store it, with
// the API server's own policy library (k8s.io/apiserver's validating
// policy: its matchers, its CEL compiler and validator). A Deny action
// refuses the write: Helm's upgrade fails there; Warn and Audit are
// warnings. The manifest check reads the policies, bindings, params and
// namespaces once; the object check evaluates each stored object.

// WarnAdmissionPolicy: a policy's Warn or Audit action fires for an
// object of the upgrade.
const WarnAdmissionPolicy values.WarningKind = "admission-policy"

// The policy resources.
var (
	admissionPolicies = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	policyBindings    = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

func init() {
	manifestChecks = append(manifestChecks, readAdmissionPolicies)
	objectChecks = append(objectChecks, checkAdmissionPolicies)
}

// PolicyViolation is an object of the upgrade that admission policies
// deny, or warn or audit about.
type PolicyViolation struct {
	Object string
	// Deny, Warn: "ValidatingAdmissionPolicy 'p' with binding 'b' denied
	// request: message", as the API server words them.
	Deny, Warn []string
}

// Verdict is a refusal when a policy denies, else a warning.
func (p PolicyViolation) Verdict(Applier) (string, *values.Warning) {
	if len(p.Deny) > 0 {
		return fmt.Sprintf("admission policy: %s: %s; Helm's upgrade would fail writing it, after writing the objects before it", p.Object, strings.Join(p.Deny, "; ")), nil
	}
	return "", &values.Warning{Kind: WarnAdmissionPolicy, Path: p.Object, Message: fmt.Sprintf("admission policy: %s: %s", p.Object, strings.Join(p.Warn, "; "))}
}

// policyEvaluator is the cluster's policies and bindings, compiled, with
// what matching them needs.
type policyEvaluator struct {
	matcher  generic.PolicyMatcher
	objIfs   admission.ObjectInterfaces
	policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	compiled map[string]validating.Validator
	bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	params   map[string]paramSource // by policy name
	// unknownNamespaces are the namespaces that do not exist: their
	// objects are refused before admission (namespaces.go)
	unknownNamespaces map[string]bool
}

// paramSource is where a policy's params are: its kind's scope and the
// objects read for its bindings.
type paramSource struct {
	scope    meta.RESTScope
	informer informers.GenericInformer
	err      error
}

// readAdmissionPolicies reads the policies and their bindings, the params
// their bindings name and the namespaces of the upgrade's objects, and
// keeps them, compiled, for checkAdmissionPolicies.
func readAdmissionPolicies(ctx context.Context, s Scope, res *Result) error {
	var items [2][]unstructured.Unstructured
	for i, gvr := range []schema.GroupVersionResource{admissionPolicies, policyBindings} {
		res.Requests++
		l, err := s.Checker.Reader.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			res.NotChecked = append(res.NotChecked, fmt.Sprintf("admission policies: this process may not list %s, to judge the upgrade's objects by them: %s",
				gvr.Resource, clusterListRule(gvr)))
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		items[i] = l.Items
	}
	if len(items[0]) == 0 || len(items[1]) == 0 {
		return nil
	}
	_, lister, err := s.admissionWrites(ctx, res)
	if err != nil {
		return err
	}
	ev := &policyEvaluator{matcher: generic.NewPolicyMatcher(matching.NewMatcher(lister, nil)),
		objIfs: admission.NewObjectInterfacesFromScheme(runtime.NewScheme()), compiled: map[string]validating.Validator{},
		params: map[string]paramSource{}, unknownNamespaces: map[string]bool{}}
	for _, o := range s.Read {
		if ns := o.Want.GetNamespace(); ns != "" {
			if _, err := lister.Get(ns); err != nil {
				ev.unknownNamespaces[ns] = true
			}
		}
	}
	for _, it := range items[0] {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &p); err != nil {
			return fmt.Errorf("reading ValidatingAdmissionPolicy %s: %w", it.GetName(), err)
		}
		admissiondefaults.SetObjectDefaults_ValidatingAdmissionPolicy(&p)
		ev.policies = append(ev.policies, &p)
		ev.compiled[p.Name] = compilePolicy(&p)
	}
	for _, it := range items[1] {
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &b); err != nil {
			return fmt.Errorf("reading ValidatingAdmissionPolicyBinding %s: %w", it.GetName(), err)
		}
		admissiondefaults.SetObjectDefaults_ValidatingAdmissionPolicyBinding(&b)
		ev.bindings = append(ev.bindings, &b)
	}
	for _, p := range ev.policies {
		if p.Spec.ParamKind != nil {
			ev.params[p.Name] = s.readParams(ctx, res, p, ev.bindings)
		}
	}
	s.Memo("admission-policies", func() any { return ev })
	return nil
}

// readParams reads the params p's bindings name (by name or selector, in
// the namespace each names; a namespaced param without one is looked up
// in each namespace of the upgrade's objects).
func (s Scope) readParams(ctx context.Context, res *Result, p *admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) paramSource {
	gv, err := schema.ParseGroupVersion(p.Spec.ParamKind.APIVersion)
	if err != nil {
		return paramSource{err: err}
	}
	m, err := s.Checker.Reader.Mapper.RESTMapping(gv.WithKind(p.Spec.ParamKind.Kind).GroupKind(), gv.Version)
	if err != nil {
		return paramSource{err: err}
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	for _, b := range bindings {
		ref := b.Spec.ParamRef
		if b.Spec.PolicyName != p.Name || ref == nil {
			continue
		}
		var where []string
		switch {
		case !namespaced:
			where = []string{""}
		case ref.Namespace != "":
			where = []string{ref.Namespace}
		default:
			for _, o := range s.Read {
				if ns := o.Want.GetNamespace(); ns != "" && !contains(where, ns) {
					where = append(where, ns)
				}
			}
		}
		for _, ns := range where {
			res.Requests++
			opts := metav1.ListOptions{}
			if ref.Name != "" {
				opts.FieldSelector = "metadata.name=" + ref.Name
			} else if ref.Selector != nil {
				sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
				if err != nil {
					return paramSource{err: err}
				}
				opts.LabelSelector = sel.String()
			}
			l, err := s.Checker.Reader.Dynamic.Resource(m.Resource).Namespace(ns).List(ctx, opts)
			if apierrors.IsForbidden(err) {
				res.NotChecked = append(res.NotChecked, fmt.Sprintf("ValidatingAdmissionPolicy %s: this process may not read its params (%s): %s",
					p.Name, m.Resource.Resource, liveobjects.Rule(m.Resource, ns, ref.Name, "list")))
				continue
			}
			if err != nil {
				return paramSource{err: err}
			}
			for i := range l.Items {
				_ = indexer.Add(&l.Items[i])
			}
		}
	}
	return paramSource{scope: m.Scope, informer: staticInformer{cache.NewGenericLister(indexer, m.Resource.GroupResource())}}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// staticInformer serves params read once to the library's CollectParams,
// which asks only whether they are synced and for their lister.
type staticInformer struct{ lister cache.GenericLister }

func (s staticInformer) Informer() cache.SharedIndexInformer { return syncedInformer{} }
func (s staticInformer) Lister() cache.GenericLister         { return s.lister }

type syncedInformer struct{ cache.SharedIndexInformer }

func (syncedInformer) HasSynced() bool { return true }

// checkAdmissionPolicies evaluates the policies on the object the apply
// would store, as the API server's dispatcher does, each binding's
// actions applied to each failed validation.
func checkAdmissionPolicies(ctx context.Context, s Scope, o liveobjects.Object, stored *unstructured.Unstructured) Finding {
	m, ok := s.memoized("admission-policies")
	if !ok || o.Mapping == nil {
		return nil
	}
	ev := m.(*policyEvaluator)
	ns := stored.GetNamespace()
	if ev.unknownNamespaces[ns] {
		return nil
	}
	op := admission.Create
	var old runtime.Object
	if o.Live != nil {
		op, old = admission.Update, o.Live
	}
	attr := admission.NewAttributesRecord(stored, old, stored.GroupVersionKind(), ns, stored.GetName(), o.Mapping.Resource, "", op, nil, false, nil)
	v := PolicyViolation{Object: o.Name()}
	say := func(p, b, msg string, deny bool) {
		if deny {
			v.Deny = append(v.Deny, fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", p, b, msg))
			return
		}
		v.Warn = append(v.Warn, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", p, b, msg))
	}
	for _, p := range ev.policies {
		failClosed := p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy == admissionregistrationv1.Fail
		configErr := func(b string, err error) {
			if failClosed {
				say(p.Name, b, "failed to configure: "+err.Error(), true)
			}
		}
		matches, gvr, gvk, err := ev.matcher.DefinitionMatches(attr, ev.objIfs, validating.NewValidatingAdmissionPolicyAccessor(p))
		if err != nil {
			configErr("", err)
			continue
		}
		if !matches {
			continue
		}
		src, hasParams := ev.params[p.Name]
		if hasParams && src.err != nil {
			configErr("", src.err)
			continue
		}
		for _, b := range ev.bindings {
			if b.Spec.PolicyName != p.Name {
				continue
			}
			ok, err := ev.matcher.BindingMatches(attr, ev.objIfs, validating.NewValidatingAdmissionPolicyBindingAccessor(b))
			if err != nil {
				configErr(b.Name, err)
				continue
			}
			if !ok {
				continue
			}
			params, err := generic.CollectParams(p.Spec.ParamKind, src.informer, src.scope, b.Spec.ParamRef, ns, nil, nil)
			if err != nil {
				configErr(b.Name, err)
				continue
			}
			versioned, err := admission.NewVersionedAttributes(attr, gvk, ev.objIfs)
			if err != nil {
				configErr(b.Name, err)
				continue
			}
			namespace, err := ev.matcher.GetNamespace(ctx, ns)
			if ns != "" && err != nil {
				configErr(b.Name, err)
				continue
			}
			if ns == "" {
				namespace = nil
			}
			if p.Spec.ParamKind == nil {
				params = []runtime.Object{nil}
			}
			for _, param := range params {
				r := ev.compiled[p.Name].Validate(ctx, gvr, versioned, param, namespace, celconfig.RuntimeCELCostBudget, nil)
				for _, d := range r.Decisions {
					if d.Action != validating.ActionDeny {
						continue
					}
					for _, action := range b.Spec.ValidationActions {
						say(p.Name, b.Name, d.Message, action == admissionregistrationv1.Deny)
					}
				}
				for _, a := range r.AuditAnnotations {
					if a.Action == validating.AuditAnnotationActionError {
						say(p.Name, b.Name, a.Error, true)
					}
				}
			}
		}
	}
	if len(v.Deny) == 0 && len(v.Warn) == 0 {
		return nil
	}
	return v
}

// compilePolicy compiles p as the API server's validating policy plugin
// does (its compilePolicy, unexported there: the same calls of the
// library's CEL compiler, in the same order).
func compilePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	hasParam := p.Spec.ParamKind != nil
	optional := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true}
	expressionOptional := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: false}
	failure := p.Spec.FailurePolicy
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, failure, err)
	}
	vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	c.CompileAndStoreVariables(vars, optional, environment.StoredExpressions)
	var mc matchconditions.Matcher
	if n := len(p.Spec.MatchConditions); n > 0 {
		conds := make([]plugincel.ExpressionAccessor, n)
		for i := range p.Spec.MatchConditions {
			conds[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		mc = matchconditions.NewMatcher(c.CompileCondition(conds, optional, environment.StoredExpressions), failure, "policy", "validate", p.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	audits := make([]plugincel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		audits[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(c.CompileCondition(validations, optional, environment.StoredExpressions), mc,
		c.CompileCondition(audits, optional, environment.StoredExpressions),
		c.CompileCondition(messages, expressionOptional, environment.StoredExpressions), failure, nil)
}
