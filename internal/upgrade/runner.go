package upgrade

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Job is one target of a run and how to upgrade it.
type Job struct {
	Target Target
	// Lease names the coordination Lease of the target, in its namespace
	// (its kind's name for it).
	Lease string
	// Source serves the chart versions; ChartName names the chart in it
	// ("" → the chart the target deploys). Not used by a rollback.
	Source     ChartSource
	ChartName  string
	Rules      []values.Rule
	Migrations []values.Migration
	// Overrides (--set, -f) are applied after the rules.
	Overrides []values.Override
	// Revert, when set, undoes an apply whose wait timed out or failed
	// (the target's Reverter).
	Revert Reverter
	// Timeout bounds the wait (> 0: a job without one is refused when it
	// comes to wait).
	Timeout time.Duration
	// CRDs applies the chart's crds/ before the target is written (the
	// spec's apply.crds); nil leaves them alone.
	CRDs CRDs
	// FailureGrace is how long a failure the target reports
	// (Readiness.Failed) may last before the wait gives up on it with
	// exit 1; 0 waits out the Timeout.
	FailureGrace time.Duration
	// Health are the gates the target must pass, once ready, before the
	// upgrade is done (the spec's wait.health); Gates reads their
	// objects (nil when there are none).
	Health []health.Gate
	Gates  Gates
	// Images checks, at preflight, that the nodes can pull the images the
	// upgrade runs; nil checks none (NoImages says why).
	Images   Images
	NoImages string
	// Pods watches the new revision's pods during the wait; a container
	// that cannot start for PodFailureGrace ends it (exit 1); nil, or a
	// grace of 0, judges no pod.
	Pods            Pods
	PodFailureGrace time.Duration
	// Settle is how long the target must stay ready, its pods watched,
	// before the upgrade is done; a container of the new revision that
	// crashes meanwhile ends it (exit 1). 0: done when ready.
	Settle time.Duration
}

// Settings are what the jobs of a run share.
type Settings struct {
	// Version is the version to upgrade to; for a rollback, the version
	// whose backup to restore ("" → the newest).
	Version           string
	AllowDowngrade    bool
	Unpause           bool
	RequireNodesReady bool
	LeaseDuration     time.Duration // how long a holder that stopped renewing keeps the Lease (default DefaultLeaseDuration)
	Heartbeat         time.Duration // how often progress is printed while nothing changes
	Node              string        // this node, for Events
	Identity          string        // this process's Lease identity
	// JobName names the Job running this (plan, pod) for Events; "" none.
	JobName string
	// LeaseAnnotations say who holds the Lease beyond the identity.
	LeaseAnnotations map[string]string
	// Names are how the caller lets a person ask for what a refusal
	// withholds (a CLI names its flags), quoted in the refusals.
	Names Names
	Log   *slog.Logger
	Out   io.Writer // the decision table
}

// Names name the settings for a person: "--allow-downgrade" on the CLI.
type Names struct {
	Version, AllowDowngrade, Unpause string
}

// Runner runs jobs: it owns the loop of situation → step, and what is
// common to every step: timing, one log line per step start and end, the
// hooks, the Events and the journal.
type Runner struct {
	Cluster Cluster
	Journal Journal // nil: no journal (merge --target)
	Hooks   Hooks   // nil: no hooks
	Settings
}

// Result is how a run of one job ended.
type Result struct {
	From, To  string
	Situation Situation
	// Leader: this process wrote the target.
	Leader bool
	// Merge is the merge result, when a merge ran.
	Merge *values.Result
	// Changes gives what the apply would do to each object, as preflight
	// computed it; nil when it computed nothing.
	Changes func() []ObjectChange
	// CRDs are the verdicts on the chart's CRDs, as preflight judged them
	// (nil without apply.crds), and Applied what the apply did.
	CRDs, CRDsApplied []CRDAction
	// HookFailures are post hooks that failed (the run went on).
	HookFailures []string
	// Images is preflight's verdict on the images; nil when it checked
	// none.
	Images *ImageCheck
}

// Run brings one job to goal. It stops at the first failed step, with an
// error naming the target and the step.
func (r *Runner) Run(ctx context.Context, job Job, goal Goal) (*Result, error) {
	j := &jobRun{Runner: r, job: job, ref: job.Target.Ref(), events: &eventQueue{}}
	defer j.close()
	log := r.Log.With("target", j.ref.String())
	var p progress
	defer func() {
		// a run that ends (or fails) while an apply's Lease is kept gives
		// it up: another node need not wait for it to expire
		if j.holdsLease() {
			_ = j.releaseLease(context.WithoutCancel(ctx))
		}
	}()
	for {
		step := next(goal, p)
		if step != StepApply && step != StepMerge && j.holdsLease() {
			// an apply that wrote nothing keeps the Lease through the new
			// merge for its next attempt; when none follows, it is given up
			if err := j.releaseLease(ctx); err != nil {
				return j.result(p), fmt.Errorf("%s: giving the lease %s up: %w", j.ref, j.job.Lease, err)
			}
		}
		if step == "" {
			break
		}
		if err := j.hook(ctx, "pre", step, p, nil); err != nil {
			log.Error("pre hook failed", "phase", step, "error", err.Error())
			return j.result(p), fmt.Errorf("%s: %w", j.ref, err)
		}
		start := time.Now()
		log.Info("phase start", "phase", step)
		np, err := j.run(ctx, step, p)
		d := time.Since(start).Round(time.Millisecond)
		if err == nil {
			p = np
		}
		if herr := j.hook(ctx, "post", step, p, err); herr != nil {
			log.Error("post hook failed", "phase", step, "error", herr.Error())
			j.hookFailures = append(j.hookFailures, herr.Error())
		}
		if err != nil {
			j.recordGates(step)
			log.Error("phase failed", "phase", step, "duration", d.String(), "error", err.Error())
			j.event(ctx, p, step, err)
			return j.result(p), fmt.Errorf("%s: %s: %w", j.ref, step, err)
		}
		log.Info("phase done", append([]any{"phase", step, "duration", d.String(), "situation", string(p.situation())}, outputAttrs(step, p)...)...)
		j.event(ctx, p, step, nil)
		if err := j.record(p, step, d); err != nil {
			return j.result(p), fmt.Errorf("%s: journal after %s: %w", j.ref, step, err)
		}
		if err := j.freeLeftLease(ctx, step, p); err != nil {
			return j.result(p), fmt.Errorf("%s: %w", j.ref, err)
		}
	}
	return j.result(p), nil
}

// outputAttrs are what a person reads of a step's output in its "phase
// done" line: steps do not log, the runner does (docs/design.md §3.2).
func outputAttrs(step string, p progress) []any {
	switch step {
	case StepResolve, StepRestore:
		r := p.resolved
		out := []any{"from", r.From, "to", r.To}
		if r.Restore != nil {
			out = append(out, "backup", r.Restore.Name)
		}
		if r.OldMissing != "" {
			out = append(out, "old_defaults", r.OldMissing)
		}
		return out
	case StepPreflight:
		if p.checked.Intent == nil {
			return []any{"note", "another process applied the target since it was read"}
		}
		out := []any{"drift_owned", p.checked.DriftOwned}
		if len(p.checked.Notes) > 0 {
			out = append(out, "notes", p.checked.Notes)
		}
		return out
	case StepMerge:
		m := p.intent.Merge
		return []any{"decisions", len(m.Decisions), "warnings", len(m.Warnings), "values_sha256", m.SHA256, "no_change", p.intent.NoChange}
	case StepApply:
		a := p.applied
		switch {
		case a.Wrote:
			return []any{"wrote", true, "version", a.Want.Version, "values_sha256", a.Want.ValuesHash, "attempt", p.attempts}
		case a.Situation.ours():
			return []any{"wrote", false, "note", "another process applied the target", "version", a.Obs.Applied.Version}
		}
		return []any{"wrote", false, "note", "the target changed since it was read", "attempt", p.attempts}
	case StepWait:
		return []any{"ready", fmt.Sprintf("%d/%d", p.ready.ReadyCount, p.ready.DesiredCount)}
	}
	return nil
}

// note tells a person what a step is doing while it runs (waiting on
// another process, a lost write, a backup): the one way a step speaks.
func (j *jobRun) note(msg string, args ...any) {
	j.Log.Info(msg, append([]any{"target", j.ref.String()}, args...)...)
}

// freeLeftLease gives up a Lease that an earlier run of this node may have
// left: the journal says that run began an apply (merged or restored) and
// never finished it, and this run will not apply (the target carries the
// apply), so no apply of this run gives it up. Release reads first and
// writes only when the Lease is ours.
func (j *jobRun) freeLeftLease(ctx context.Context, step string, p progress) error {
	if (step != StepResolve && step != StepRestore) || !p.situation().ours() || j.entry == nil || !j.entry.ApplyInterrupted() {
		return nil
	}
	j.lease = j.Cluster.Lease(j.ref.Namespace, j.job.Lease, nil)
	if err := j.releaseLease(ctx); err != nil {
		return fmt.Errorf("giving up the lease %s an interrupted run left: %w", j.job.Lease, err)
	}
	return nil
}

// MergeOnly resolves the job and merges for the target as it stands, with
// no check, no hook, no Event, no journal and no write (merge --target).
// A refused merge returns its Result with the error, for the report.
func (r *Runner) MergeOnly(ctx context.Context, job Job) (*values.Result, error) {
	j := &jobRun{Runner: r, job: job, ref: job.Target.Ref(), events: &eventQueue{}}
	defer j.close()
	res, err := j.resolve(ctx)
	if err != nil {
		return nil, err
	}
	in, err := j.merged(ctx, *res, res.Obs)
	if in == nil {
		return nil, err
	}
	return in.Merge, err
}

// run runs one step with its typed inputs and returns the progress with
// its output.
func (j *jobRun) run(ctx context.Context, step string, p progress) (progress, error) {
	var err error
	switch step {
	case StepResolve:
		p.resolved, err = j.resolve(ctx)
	case StepRestore:
		p.resolved, p.intent, err = j.restore(ctx)
	case StepPreflight:
		p.checked, err = j.preflight(ctx, *p.resolved)
	case StepMerge:
		p.intent, err = j.mergeStep(ctx, *p.resolved, p.checked, p.observed())
	case StepApply:
		p.attempts++
		p.applied, err = j.apply(ctx, *p.resolved, p.intent, p.fresh(), p.attempts)
	case StepWait:
		p.ready, err = j.wait(ctx, p.want())
	case StepVerify:
		err = j.verify(p)
		p.verified = err == nil
	default:
		err = fmt.Errorf("no step %q", step)
	}
	return p, err
}

// jobRun is one job being run: the ports, and what the runner keeps
// beside the steps' outputs (the watch, the Lease, the queued Events, the
// journal entry).
type jobRun struct {
	*Runner
	job          Job
	ref          Ref
	leader       bool // this process took the Lease: its Events are sent
	wrote        bool // this process wrote the target
	events       *eventQueue
	entry        *Entry
	watch        Watch
	stopWatch    func()
	pods         PodWatch // the new revision's, shared by the apply and the wait
	podsVersion  string   // the version pods watches
	stopPods     func()
	lease        Lease
	stopLease    func()
	leaseLost    <-chan struct{}
	leaseFreed   bool
	hookFailures []string
	crdsApplied  []CRDAction
	lastGates    []health.Verdict // as the last wait judged them
	defaults     map[string]any   // the new chart's, for the gates' values
}

func (j *jobRun) result(p progress) *Result {
	res := &Result{Situation: p.situation(), Leader: j.wrote, HookFailures: j.hookFailures}
	if p.resolved != nil {
		res.From, res.To = p.resolved.From, p.resolved.To
	}
	switch {
	case p.intent != nil && p.intent.Merge != nil:
		res.Merge = p.intent.Merge
	case p.checked != nil && p.checked.Intent != nil:
		res.Merge = p.checked.Intent.Merge
	}
	if p.checked != nil {
		res.Changes = p.checked.Changes
		if p.checked.Intent != nil && p.checked.Intent.CRDs != nil {
			res.CRDs = p.checked.Intent.CRDs.Actions
		}
		res.Images = p.checked.Images
	}
	res.CRDsApplied = j.crdsApplied
	return res
}

// close stops what the steps started: the watches and the Lease renewal.
func (j *jobRun) close() {
	if j.stopWatch != nil {
		j.stopWatch()
	}
	if j.stopPods != nil {
		j.stopPods()
	}
	if j.stopLease != nil {
		j.stopLease()
	}
}

// observe starts (once) the watch of the target.
func (j *jobRun) observe(ctx context.Context) (Watch, error) {
	if j.watch != nil {
		return j.watch, nil
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := j.job.Target.Watch(wctx)
	if err == nil {
		w, err = j.gate(wctx, w)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	j.watch, j.stopWatch = w, cancel
	return w, nil
}

// podWatch starts (once for a version) the watch of the pods of the
// revision at want's version: the apply starts it (a hook's pods run
// inside the apply) and the wait goes on with it, its informers listed
// once; a wait with no apply before it (a retried Job) starts it. nil
// where the pods are not seen from here.
func (j *jobRun) podWatch(ctx context.Context, o *Observed, want Want) (PodWatch, error) {
	if j.pods != nil && j.podsVersion == want.Version {
		return j.pods, nil
	}
	if j.stopPods != nil {
		j.stopPods()
		j.pods, j.stopPods = nil, nil
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pw, err := j.job.Pods.Watch(pctx, o, want)
	if err != nil || pw == nil {
		cancel()
		return nil, err
	}
	j.pods, j.podsVersion, j.stopPods = pw, want.Version, cancel
	return pw, nil
}

// hook runs a pre or post hook of step, unless the run is quiet (it
// found the target done).
func (j *jobRun) hook(ctx context.Context, kind, step string, p progress, stepErr error) error {
	if j.Hooks == nil || p.quiet() {
		return nil
	}
	c := HookContext{Target: j.ref, Situation: p.situation(), Node: j.Node, ValuesHash: p.want().ValuesHash}
	if p.resolved != nil {
		c.From, c.To = p.resolved.From, p.resolved.To
	}
	return j.Hooks.Run(ctx, kind, step, c, stepErr)
}

// recordGates keeps in the journal the health gates as a failed wait
// last judged them (a timeout, a failed gate), for status.
func (j *jobRun) recordGates(step string) {
	if step != StepWait || j.Journal == nil || j.entry == nil || j.lastGates == nil {
		return
	}
	j.entry.Gates = j.lastGates
	if err := j.Journal.Save(*j.entry); err != nil {
		j.Log.Warn("could not keep the health gates in the journal", "target", j.ref.String(), "error", err.Error())
	}
}

// record saves a finished step in the journal entry of this upgrade. The
// journal is local: it never writes to the cluster.
func (j *jobRun) record(p progress, step string, d time.Duration) error {
	if j.Journal == nil || p.resolved == nil || p.resolved.To == "" {
		return nil
	}
	if j.entry == nil {
		e, ok, err := j.Journal.Load(j.ref.String(), p.resolved.To)
		if err != nil {
			return err
		}
		// a finished entry of an earlier upgrade to this version (say,
		// before a rollback) is not this upgrade's: start afresh unless
		// the target is still what that entry finished
		if !ok || (e.Completed && !p.resolved.Situation.ours()) {
			e = Entry{Target: j.ref.String(), FromVersion: p.resolved.From, ToVersion: p.resolved.To}
		}
		j.entry = &e
	}
	if j.entry.Phases == nil {
		j.entry.Phases = map[string]Step{}
	}
	// the hash of the values this run applies or waits for
	if h := p.want().ValuesHash; h != "" {
		j.entry.ValuesHash = h
	} else if p.intent != nil && p.intent.Merge != nil {
		j.entry.ValuesHash = p.intent.Merge.SHA256
	}
	if p.verified {
		j.entry.Completed = true
	}
	if p.ready != nil {
		j.entry.Gates = p.ready.Gates
	}
	j.entry.Phases[step] = Step{FinishedAt: time.Now().UTC(), Duration: d.String()}
	if step == StepWait {
		// saved with verify's record, which follows at once: the exit
		// should follow readiness at once, and a run killed in between
		// judges readiness again, which this record would not spare it
		return nil
	}
	return j.Journal.Save(*j.entry)
}
