package upgrade

import (
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
)

// Readiness is the judgement of one look at a target for what was applied.
type Readiness struct {
	Ready   bool
	Waiting []string // why it is not ready yet, one line each
	// Ready of Desired units (clusters for a ManagedChart, the release's
	// objects for a HelmChart) are ready; Unit names them ("" → clusters).
	ReadyCount, DesiredCount int64
	Unit                     string
	NonReady                 []string // the non-ready resources, as the target's controllers report them
	// Failed, when not empty, says the target's controllers reported a
	// terminal failure of what was applied (Fleet's ErrApplied, a chart
	// Rancher cannot find): waiting longer helps only if they retry and
	// succeed, so the wait gives up when it lasts (Job.FailureGrace).
	Failed string
	// Terminal says the failure lasts until the target changes (a Job
	// helm-controller will not run again): the wait gives up at once,
	// without the grace.
	Terminal bool
	// Gates are the health gates as judged once the target itself was
	// ready (nil before, or without gates): one that is not current keeps
	// the target not ready, and a failed one is a terminal failure.
	Gates []health.Verdict
	// Failing are the new revision's containers that cannot start
	// (WaitOptions.Pods), and PodFailed the one that failed for the whole
	// grace (the wait's end).
	Failing   []PodFailure
	PodFailed *PodFailure
	// Settling: the target was ready and PodFailed crashed while it
	// settled (WaitOptions.Settle).
	Settling bool
}

// Wait adds a reason it is not ready yet.
func (r *Readiness) Wait(format string, args ...any) {
	r.Waiting = append(r.Waiting, fmt.Sprintf(format, args...))
}

// Progress is one line for a person watching the wait.
func (r Readiness) Progress() string {
	s := fmt.Sprintf("ready %d/%d", r.ReadyCount, r.DesiredCount)
	if r.Unit != "" {
		s += " " + r.Unit
	}
	if r.Failed != "" {
		s += "; failed: " + r.Failed
	}
	if len(r.Failing) > 0 {
		f := r.Failing[0]
		s += fmt.Sprintf("; cannot start: pod %s %s: %s", f.Pod, f.Container, f.Reason)
		if len(r.Failing) > 1 {
			s += fmt.Sprintf(" (+%d more)", len(r.Failing)-1)
		}
	}
	if len(r.Waiting) > 0 {
		s += "; waiting: " + r.Waiting[0]
	}
	if len(r.NonReady) > 0 {
		s += "; not ready: " + r.NonReady[0]
		if len(r.NonReady) > 1 {
			s += fmt.Sprintf(" (+%d more)", len(r.NonReady)-1)
		}
	}
	return s
}

// JudgeTarget is the part of readiness every kind shares: the target
// itself carries what was applied. It adds to r a line for each way o
// falls short of want: absent, at another version, without the record of
// the apply or with values changed since it, paused. A want without a
// values hash (nothing was written) asks only for the version. It returns
// false when o is nil, so that an adapter judges nothing further.
func JudgeTarget(r *Readiness, kind string, o *Observed, want Want) bool {
	if o == nil {
		r.Wait("the %s does not exist", kind)
		return false
	}
	if o.Version != want.Version {
		r.Wait("%s spec.version is %q, not %q", kind, o.Version, want.Version)
	}
	if want.ValuesHash != "" {
		if o.Applied.Version != want.Version || o.Applied.ValuesHash != want.ValuesHash {
			r.Wait("%s is not annotated with the applied version and values", kind)
		}
		if o.ValuesHash != want.ValuesHash {
			r.Wait("%s values differ from the applied ones (changed by someone else?)", kind)
		}
	}
	if o.Paused {
		r.Wait("%s is paused", kind)
	}
	return true
}
