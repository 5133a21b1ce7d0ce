package upgrade

import (
	"context"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// judgeGates judges each gate on what was seen of its objects, with the
// values the chart is rendered with (defaults, the new chart's; under the
// target's user values, what the apply wrote once it carries that apply;
// under the overlay its controller lays on them) and the version waited
// for.
func judgeGates(gates []health.Gate, seen []health.Seen, defaults map[string]any, o *Observed, want Want) []health.Verdict {
	vars := health.Vars{Version: want.Version, Values: defaults}
	if o != nil {
		vars.Values = values.Overlay(values.Overlay(defaults, o.Values), o.Overlay)
	}
	out := make([]health.Verdict, len(gates))
	for i, g := range gates {
		var s health.Seen
		if i < len(seen) {
			s = seen[i]
		}
		out[i] = health.Judge(g, s, vars)
	}
	return out
}

// withGates adds the gates' verdicts to a readiness r that holds
// otherwise: a gate not current keeps it not ready, the first failed one
// is its terminal failure.
func withGates(r Readiness, verdicts []health.Verdict) Readiness {
	r.Gates = verdicts
	for _, v := range verdicts {
		switch {
		case v.BadExpr != "":
			r.Failed, r.Terminal = v.Line(), true
		case v.State == health.Current:
			continue
		case v.State == health.Failed:
			if r.Failed == "" {
				r.Failed, r.Terminal = v.Line(), true
			}
		default:
			r.Wait("%s", v.Line())
		}
		r.Ready = false
	}
	return r
}

// badGate is the first gate whose expression gave a value of the wrong
// type, "" when none did.
func (r Readiness) badGate() string {
	for _, v := range r.Gates {
		if v.BadExpr != "" {
			return v.BadExpr
		}
	}
	return ""
}

// gateFailed reports whether r failed on a health gate (not on the
// target's own controllers).
func (r Readiness) gateFailed() bool {
	for _, v := range r.Gates {
		if v.State == health.Failed {
			return true
		}
	}
	return false
}

// look judges readiness for want once: the target's own, then, when that
// holds, the job's health gates.
func (j *jobRun) look(ctx context.Context, o *Observed, want Want) (Readiness, error) {
	r, err := j.job.Target.Look(ctx, o, want)
	if err != nil || !r.Ready || len(j.job.Health) == 0 {
		return r, err
	}
	seen, err := j.job.Gates.Read(ctx, o, want)
	if err != nil {
		return r, err
	}
	return withGates(r, judgeGates(j.job.Health, seen, j.defaults, o, want)), nil
}

// gatedWatch is the target's watch with the job's health gates judged
// over it once the target is ready; it signals a change of either.
type gatedWatch struct {
	Watch
	gates    []health.Gate
	defaults map[string]any
	view     GateWatch
	changed  chan struct{}
}

// gate adds the job's health gates to the target's watch w: their
// objects watched until ctx ends.
func (j *jobRun) gate(ctx context.Context, w Watch) (Watch, error) {
	if len(j.job.Health) == 0 {
		return w, nil
	}
	view, err := j.job.Gates.Watch(ctx, w.Current())
	if err != nil {
		return nil, err
	}
	g := gatedWatch{Watch: w, gates: j.job.Health, defaults: j.defaults, view: view, changed: make(chan struct{}, 1)}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Changed():
			case <-view.Changed():
			}
			select {
			case g.changed <- struct{}{}:
			default:
			}
		}
	}()
	return g, nil
}

func (g gatedWatch) Readiness(want Want) Readiness {
	r := g.Watch.Readiness(want)
	if !r.Ready {
		return r
	}
	o := g.Current()
	return withGates(r, judgeGates(g.gates, g.view.Seen(o, want), g.defaults, o, want))
}

func (g gatedWatch) Changed() <-chan struct{} { return g.changed }
