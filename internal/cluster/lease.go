package cluster

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Lease is a coordination.k8s.io Lease that makes one process in the
// cluster the one that applies a target; the others wait for it.
type Lease struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Identity  string
	Duration  time.Duration // how long a holder that stopped renewing keeps it
	// Annotations say who holds it beyond the identity (the SUC plan and
	// pod); they are written whenever the Lease is taken.
	Annotations map[string]string
}

// TryAcquire takes the Lease when it is free, expired, or already ours. It
// returns whether we hold it and, when not, who does. It never waits.
func (l *Lease) TryAcquire(ctx context.Context) (bool, string, error) {
	leases := l.Client.CoordinationV1().Leases(l.Namespace)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(l.Duration / time.Second)
	cur, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace, Annotations: l.Annotations,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "chart-upgrader"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &l.Identity, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now},
		}
		_, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return l.TryAcquire(ctx) // someone was faster: look again
		}
		if err != nil {
			return false, "", fmt.Errorf("creating lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		return true, l.Identity, nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	holder := ""
	if cur.Spec.HolderIdentity != nil {
		holder = *cur.Spec.HolderIdentity
	}
	if holder != "" && holder != l.Identity && !expired(cur, time.Now()) {
		return false, holder, nil
	}
	if holder != l.Identity {
		if len(l.Annotations) > 0 {
			ann := cur.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			for k, v := range l.Annotations {
				ann[k] = v
			}
			cur.SetAnnotations(ann)
		}
		cur.Spec.AcquireTime = &now
		transitions := int32(1)
		if cur.Spec.LeaseTransitions != nil {
			transitions += *cur.Spec.LeaseTransitions
		}
		cur.Spec.LeaseTransitions = &transitions
	}
	cur.Spec.HolderIdentity = &l.Identity
	cur.Spec.RenewTime = &now
	cur.Spec.LeaseDurationSeconds = &secs
	if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return false, holder, nil // another process took it between our read and write
		}
		return false, "", fmt.Errorf("taking lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return true, l.Identity, nil
}

// expired reports whether the holder stopped renewing long enough ago.
func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// Hold renews the Lease every third of its duration until ctx ends or the
// returned stop function is called. lost is closed if the Lease was taken by
// another process, so the holder can stop before writing.
func (l *Lease) Hold(ctx context.Context) (stop func(), lost <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	lostCh := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(l.Duration / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				held, _, err := l.TryAcquire(ctx)
				if err == nil && !held {
					close(lostCh)
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }, lostCh
}

// Release gives the Lease up if we hold it, so a waiting process need not
// wait for it to expire. Releasing a Lease we do not hold does nothing.
func (l *Lease) Release(ctx context.Context) error {
	leases := l.Client.CoordinationV1().Leases(l.Namespace)
	cur, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.Identity {
		return nil
	}
	empty := ""
	cur.Spec.HolderIdentity = &empty
	if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return nil
}
