package phase

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Events records one Kubernetes Event on the ManagedChart per phase
// outcome. Until this process holds the Lease, events are kept back and
// sent when it takes it: a run that refuses, that finds nothing to do, or
// that follows another process's apply writes nothing to the cluster.
// Events never carry values.
type Events struct {
	Component string
	pending   []corev1.Event
}

// Phase records the outcome of a phase.
func (e *Events) Phase(ctx context.Context, s *State, phase string, err error) {
	if e == nil || s.MC == nil {
		return
	}
	ev := corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: s.MC.Name + ".chart-upgrader.", Namespace: s.MC.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: "management.cattle.io/v3", Kind: "ManagedChart",
			Namespace: s.MC.Namespace, Name: s.MC.Name, UID: s.MC.Object.GetUID()},
		Type:                corev1.EventTypeNormal,
		Reason:              "Phase" + title(phase),
		Message:             fmt.Sprintf("%s %s → %s: done", phase, s.From, s.To),
		Source:              corev1.EventSource{Component: e.Component, Host: s.Opts.NodeName},
		ReportingController: "chart-upgrader.io/chart-upgrader",
		ReportingInstance:   s.Identity,
		Action:              phase,
		Count:               1,
	}
	if err != nil {
		ev.Type = corev1.EventTypeWarning
		ev.Reason += "Failed"
		ev.Message = fmt.Sprintf("%s %s → %s failed: %s", phase, s.From, s.To, truncate(err.Error(), 900))
	}
	if job := s.Opts.SUC.String(); job != "" {
		ev.Message += " [" + job + "]"
	}
	if !s.Leader {
		e.pending = append(e.pending, ev)
		return
	}
	for _, p := range append(e.pending, ev) {
		e.send(ctx, s, p)
	}
	e.pending = nil
}

func (e *Events) send(ctx context.Context, s *State, ev corev1.Event) {
	now := metav1.NewTime(time.Now())
	ev.FirstTimestamp, ev.LastTimestamp = now, now
	ev.EventTime = metav1.NewMicroTime(now.Time)
	if _, err := s.Env.Kube.CoreV1().Events(ev.Namespace).Create(ctx, &ev, metav1.CreateOptions{}); err != nil {
		s.Opts.Log.Warn("could not record event", "reason", ev.Reason, "error", err.Error())
	}
}

func title(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
