package upgrade

import (
	"context"
	"fmt"
)

// eventQueue holds the Events of a run until this process holds the Lease:
// a run that refuses, that finds nothing to do, or that follows another
// process's apply writes nothing to the cluster.
type eventQueue struct{ pending []Event }

// event records the outcome of a step as one Event on the target.
func (j *jobRun) event(ctx context.Context, p progress, step string, err error) {
	o := p.observed()
	if o == nil {
		return
	}
	from, to := p.resolved.From, p.resolved.To
	e := Event{Target: j.ref, UID: o.UID, Reason: "Phase" + title(step), Action: step,
		Message: fmt.Sprintf("%s %s → %s: done", step, from, to), Node: j.Node, Reporting: j.Identity}
	if err != nil {
		e.Warning = true
		e.Reason += "Failed"
		e.Message = fmt.Sprintf("%s %s → %s failed: %s", step, from, to, truncate(err.Error(), 900))
	}
	if j.JobName != "" {
		e.Message += " [" + j.JobName + "]"
	}
	if !j.leader {
		j.events.pending = append(j.events.pending, e)
		return
	}
	for _, pe := range append(j.events.pending, e) {
		j.Cluster.Event(ctx, pe)
	}
	j.events.pending = nil
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
