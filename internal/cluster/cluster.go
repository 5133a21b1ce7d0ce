package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Cluster is the upgrade.Cluster port over the API clients, for the
// process with Lease identity Identity.
type Cluster struct {
	*Clients
	Identity      string
	LeaseDuration time.Duration
	// Kinds give the apiVersion and kind of a target's object, for the
	// involvedObject of its Events.
	Kinds kind.Set

	events sync.WaitGroup // the Events being sent (Flush)
}

// eventTimeout bounds the sending of one Event, also when the run that
// records it was cancelled (its failure is worth an Event).
const eventTimeout = 10 * time.Second

var _ upgrade.Cluster = (*Cluster)(nil)

// Lease returns the coordination Lease namespace/name held under this
// process's identity.
func (c *Cluster) Lease(namespace, name string, annotations map[string]string) upgrade.Lease {
	return &Lease{Client: c.Kube, Namespace: namespace, Name: name, Identity: c.Identity,
		Duration: c.LeaseDuration, Annotations: annotations}
}

// NotReadyNodes names the nodes whose Ready condition is not True.
func (c *Cluster) NotReadyNodes(ctx context.Context) ([]string, error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []string
	for _, n := range nodes.Items {
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			out = append(out, n.Name)
		}
	}
	return out, nil
}

// Event records e as a Kubernetes Event on its target. It is sent while
// the run goes on (an Event is a courtesy, not a step: nothing waits for
// it but Flush, before the process exits); a failure is logged, never
// returned.
func (c *Cluster) Event(ctx context.Context, e upgrade.Event) {
	k, _ := c.Kinds.Lookup(e.Target.Kind)
	now := metav1.NewTime(time.Now())
	ev := corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: e.Target.Name + ".chart-upgrader.", Namespace: e.Target.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: k.APIVersion, Kind: k.Spelling,
			Namespace: e.Target.Namespace, Name: e.Target.Name, UID: types.UID(e.UID)},
		Type:                corev1.EventTypeNormal,
		Reason:              e.Reason,
		Message:             e.Message,
		Source:              corev1.EventSource{Component: "chart-upgrader", Host: e.Node},
		ReportingController: "chart-upgrader.io/chart-upgrader",
		ReportingInstance:   e.Reporting,
		Action:              e.Action,
		Count:               1,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		EventTime:           metav1.NewMicroTime(now.Time),
	}
	if e.Warning {
		ev.Type = corev1.EventTypeWarning
	}
	c.events.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
		defer cancel()
		if _, err := c.Kube.CoreV1().Events(ev.Namespace).Create(ctx, &ev, metav1.CreateOptions{}); err != nil {
			c.Log.Warn("could not record event", "reason", ev.Reason, "error", err.Error())
		}
	})
}

// Flush waits until the Events recorded so far are sent (or failed).
func (c *Cluster) Flush() { c.events.Wait() }
