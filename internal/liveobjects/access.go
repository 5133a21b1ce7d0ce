package liveobjects

import (
	"context"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	rbacv1helpers "k8s.io/kubernetes/pkg/apis/rbac/v1"
)

// SelfAccess answers Access with SelfSubjectRulesReviews and
// SelfSubjectAccessReviews (which every authenticated user may create):
// a question about a kind in a namespace, from the rules one rules review
// of that namespace lists, when the API server's authorizers list them
// all (RBAC, the Node authorizer for others than nodes); any other
// question, and every question where they do not, with an access review,
// once per resource, namespace and verb.
type SelfAccess struct {
	Kube kubernetes.Interface

	mu    sync.Mutex
	known map[authorizationv1.ResourceAttributes]bool
	rules map[string]*namespaceRules // by namespace
}

// namespaceRules are the rules a rules review of one namespace listed,
// and whether they are all the authorizers' (the review is complete).
type namespaceRules struct {
	once     sync.Once
	rules    []authorizationv1.ResourceRule
	complete bool
	err      error
}

// rulesIn reviews this process's rules in namespace once, however many
// ask at the same time.
func (s *SelfAccess) rulesIn(ctx context.Context, namespace string) ([]authorizationv1.ResourceRule, bool, error) {
	s.mu.Lock()
	if s.rules == nil {
		s.rules = map[string]*namespaceRules{}
	}
	r, ok := s.rules[namespace]
	if !ok {
		r = &namespaceRules{}
		s.rules[namespace] = r
	}
	s.mu.Unlock()
	r.once.Do(func() {
		review, err := s.Kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
			&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}, metav1.CreateOptions{})
		if err != nil {
			r.err = err
			return
		}
		r.rules, r.complete = review.Status.ResourceRules, !review.Status.Incomplete && review.Status.EvaluationError == ""
	})
	return r.rules, r.complete, r.err
}

// allows says whether one of rules lets attrs (a request without a
// name) through, matched as the RBAC authorizer matches its rules.
func allows(rules []authorizationv1.ResourceRule, attrs authorizationv1.ResourceAttributes) bool {
	resource := attrs.Resource
	if attrs.Subresource != "" {
		resource += "/" + attrs.Subresource
	}
	for _, r := range rules {
		rule := rbacv1.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames}
		if rbacv1helpers.VerbMatches(&rule, attrs.Verb) && rbacv1helpers.APIGroupMatches(&rule, attrs.Group) &&
			rbacv1helpers.ResourceMatches(&rule, resource, attrs.Subresource) && rbacv1helpers.ResourceNameMatches(&rule, attrs.Name) {
			return true
		}
	}
	return false
}

// May says whether this process may do each of verbs on resource in
// namespace.
func (s *SelfAccess) May(ctx context.Context, resource schema.GroupVersionResource, namespace string, verbs ...string) (bool, error) {
	for _, verb := range verbs {
		ok, err := s.may(ctx, authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb,
			Group: resource.Group, Resource: resource.Resource})
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// MayOn says whether this process may do verb on the object name of
// resource in namespace.
func (s *SelfAccess) MayOn(ctx context.Context, resource schema.GroupVersionResource, namespace, name, verb string) (bool, error) {
	return s.may(ctx, authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Name: name,
		Group: resource.Group, Resource: resource.Resource})
}

func (s *SelfAccess) may(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
	s.mu.Lock()
	ok, seen := s.known[attrs]
	s.mu.Unlock()
	if seen {
		return ok, nil
	}
	if attrs.Namespace != "" && attrs.Name == "" {
		rules, complete, err := s.rulesIn(ctx, attrs.Namespace)
		if err != nil {
			return false, err
		}
		if complete {
			return allows(rules, attrs), nil
		}
	}
	a := attrs
	review, err := s.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}},
		metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		s.known = map[authorizationv1.ResourceAttributes]bool{}
	}
	s.known[attrs] = review.Status.Allowed
	return review.Status.Allowed, nil
}
