package applycheck

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
)

// namespaceRead is one read of a namespace's labels.
type namespaceRead struct {
	labels map[string]string
	// found: it exists; unread says why it could not be read (the rule
	// to add), "" when it was.
	found  bool
	unread string
	err    error
}

// namespaceLabels reads namespace ns once per check of a manifest,
// whichever check asks (Pod Security, admission webhooks and policies
// match namespace labels): a namespace the new chart renders is taken
// with its rendered labels. A read the process may not make is unread,
// with the rule to add.
func (s Scope) namespaceLabels(ctx context.Context, res *Result, ns string) namespaceRead {
	for _, o := range s.Objects {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" && o.GetName() == ns {
			return namespaceRead{labels: o.GetLabels(), found: true}
		}
	}
	return s.Memo("namespace/"+ns, func() any {
		res.Requests++
		got, err := s.Checker.Reader.Dynamic.Resource(namespaces).Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return namespaceRead{}
		case apierrors.IsForbidden(err):
			return namespaceRead{unread: fmt.Sprintf("this process may not read namespace %s: %s", ns, liveobjects.Rule(namespaces, "", ns, "get"))}
		case err != nil:
			return namespaceRead{err: fmt.Errorf("reading namespace %s: %w", ns, err)}
		}
		return namespaceRead{labels: got.GetLabels(), found: true}
	}).(namespaceRead)
}
