package applycheck

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is apply.recreate: an object the API server would refuse to
// update (an immutable field) that the spec lists is deleted, its
// dependents orphaned (a workload's pods, a StatefulSet's claims stay and
// the new object adopts them), and created again by the apply.

// Recreated is an object the upgrade deletes and creates again.
type Recreated struct {
	Object string // Kind namespace/name
	// Why is the API server's refusal of the update.
	Why string

	obj liveobjects.Object // as read: its mapping and its live copy
}

// Verdict is a warning, whoever applies.
func (r Recreated) Verdict(Applier) (string, *values.Warning) {
	return "", &values.Warning{Kind: values.WarnRecreate, Path: r.Object, Message: r.String()}
}

// String is the warning: what is recreated and why.
func (r Recreated) String() string {
	return fmt.Sprintf("%s: the API server would refuse to update it (%s); apply.recreate lists it: the upgrade deletes it, leaving its pods and claims, and creates it again",
		r.Object, r.Why)
}

// recreateEntries are the forms an object answers to in apply.recreate.
func recreateEntries(o *unstructured.Unstructured) []string {
	out := []string{o.GetKind() + "/" + o.GetName()}
	if ns := o.GetNamespace(); ns != "" {
		out = append(out, o.GetKind()+"/"+ns+"/"+o.GetName())
	}
	return out
}

// listedForRecreate says which objects of read list names, and refuses
// (bad input) an entry that names no object of the new chart.
func listedForRecreate(read []liveobjects.Object, list []string) (map[int]bool, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[int]bool{}
	found := map[string]bool{}
	for i, o := range read {
		for _, e := range recreateEntries(o.Want) {
			for _, l := range list {
				if l == e {
					out[i], found[l] = true, true
				}
			}
		}
	}
	var missing []string
	for _, l := range list {
		if !found[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return nil, outcome.BadInput(fmt.Errorf("apply.recreate: %s: no object of the new chart (want KIND/NAME or KIND/NAMESPACE/NAME as the chart's manifest names it)",
			strings.Join(missing, ", ")))
	}
	return out, nil
}

// recreate judges recreating o instead of updating it (as r creates a
// new object), as rejected says
// the update is refused: the object must be valid to create, and this
// process allowed to delete it. It returns the recreation, or the
// refusal that stands.
func (c Checker) recreate(ctx context.Context, o liveobjects.Object, r Request, rejected *Rejected) (*Recreated, *Rejected) {
	asNew := o
	asNew.Live = nil
	if refused, _ := c.created(ctx, asNew, r); refused != nil {
		return nil, refused
	}
	if c.Reader.Access != nil && o.Mapping != nil {
		ok, err := c.Reader.Access.MayOn(ctx, o.Mapping.Resource, o.Want.GetNamespace(), o.Want.GetName(), "delete")
		if err != nil {
			return nil, &Rejected{Object: o.Name(), Why: "asking whether this process may delete it: " + err.Error()}
		}
		if !ok {
			refused := *rejected
			refused.Why += "; apply.recreate lists it, but this process may not delete it: " +
				liveobjects.Rule(o.Mapping.Resource, o.Want.GetNamespace(), o.Want.GetName(), "delete")
			return nil, &refused
		}
	}
	return &Recreated{Object: o.Name(), Why: rejected.Why, obj: o}, nil
}

// DeleteForRecreate deletes each object res says the upgrade recreates,
// as it was read (a precondition on its UID: an object made since is
// left alone), leaving its dependents; one already gone is done. It
// returns the objects deleted.
func (c Checker) DeleteForRecreate(ctx context.Context, res Result) ([]string, error) {
	orphan := metav1.DeletePropagationOrphan
	var out []string
	for _, r := range FindingsOf[Recreated](res.Findings) {
		live := r.obj.Live
		client := c.Reader.Dynamic.Resource(r.obj.Mapping.Resource).Namespace(live.GetNamespace())
		uid := live.GetUID()
		err := client.Delete(ctx, live.GetName(), metav1.DeleteOptions{PropagationPolicy: &orphan, Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			out = append(out, r.Object)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// gone already, or made again since: nothing to delete
		default:
			return out, fmt.Errorf("deleting %s to create it again (apply.recreate): %w", r.Object, err)
		}
	}
	return out, nil
}
