package liveobjects

import (
	"context"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// SelfAccess answers Access with SelfSubjectAccessReviews (which every
// authenticated user may create), once per resource, namespace and verb.
type SelfAccess struct {
	Kube kubernetes.Interface

	mu    sync.Mutex
	known map[authorizationv1.ResourceAttributes]bool
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
