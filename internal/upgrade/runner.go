package upgrade

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Job is one target of a run and how to upgrade it.
type Job struct {
	Target Target
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
	// Timeout bounds the wait (> 0).
	Timeout time.Duration
	// FailureGrace is how long a failure the target reports
	// (Readiness.Failed) may last before the wait gives up on it with
	// exit 1; 0 waits out the Timeout.
	FailureGrace time.Duration
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
	// HookFailures are post hooks that failed (the run went on).
	HookFailures []string
}

// Run brings one job to goal. It stops at the first failed step, with an
// error naming the target and the step.
func (r *Runner) Run(ctx context.Context, job Job, goal Goal) (*Result, error) {
	j := &jobRun{Runner: r, job: job, ref: job.Target.Ref(), events: &eventQueue{}}
	defer j.close()
	log := r.Log.With("target", j.ref.String())
	var p progress
	for {
		step := next(goal, p)
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
		if (step == StepResolve || step == StepRestore) && err == nil && p.situation() == SituationDone {
			j.noop = true // a re-run after success: no hooks from here on
		}
		if herr := j.hook(ctx, "post", step, p, err); herr != nil {
			log.Error("post hook failed", "phase", step, "error", herr.Error())
			j.hookFailures = append(j.hookFailures, herr.Error())
		}
		if err != nil {
			log.Error("phase failed", "phase", step, "duration", d.String(), "error", err.Error())
			j.event(ctx, p, step, err)
			return j.result(p), fmt.Errorf("%s: %s: %w", j.ref, step, err)
		}
		log.Info("phase done", "phase", step, "duration", d.String(), "situation", string(p.situation()))
		j.event(ctx, p, step, nil)
		if err := j.record(p, step, d); err != nil {
			return j.result(p), fmt.Errorf("%s: journal after %s: %w", j.ref, step, err)
		}
	}
	return j.result(p), nil
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
	p, err := j.plan(ctx, *res, res.Obs)
	if p == nil {
		return nil, err
	}
	return p.Merge, err
}

// run runs one step with its typed inputs and returns the progress with
// its output.
func (j *jobRun) run(ctx context.Context, step string, p progress) (progress, error) {
	var err error
	switch step {
	case StepResolve:
		p.resolved, err = j.resolve(ctx)
	case StepRestore:
		p.resolved, err = j.restore(ctx)
	case StepPreflight:
		p.checked, err = j.preflight(ctx, *p.resolved)
	case StepMerge:
		p.plan, err = j.mergeStep(ctx, *p.resolved, p.checked)
	case StepApply:
		p.applied, err = j.apply(ctx, *p.resolved, p.plan)
	case StepWait:
		p.ready, err = j.wait(ctx, p.want())
	case StepVerify:
		err = j.verify(ctx)
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
	noop         bool // resolve found the target done: no hooks, nothing written
	leader       bool // this process took the Lease: its Events are sent
	wrote        bool // this process wrote the target
	events       *eventQueue
	entry        *Entry
	watch        Watch
	stopWatch    func()
	lease        Lease
	stopLease    func()
	leaseLost    <-chan struct{}
	leaseFreed   bool
	hookFailures []string
}

func (j *jobRun) result(p progress) *Result {
	res := &Result{Situation: p.situation(), Leader: j.wrote, HookFailures: j.hookFailures}
	if p.resolved != nil {
		res.From, res.To = p.resolved.From, p.resolved.To
	}
	switch {
	case p.plan != nil:
		res.Merge = p.plan.Merge
	case p.checked != nil && p.checked.Plan != nil:
		res.Merge = p.checked.Plan.Merge
	}
	return res
}

// close stops what the steps started: the watch and the Lease renewal.
func (j *jobRun) close() {
	if j.stopWatch != nil {
		j.stopWatch()
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
	if err != nil {
		cancel()
		return nil, err
	}
	j.watch, j.stopWatch = w, cancel
	return w, nil
}

// hook runs a pre or post hook of step, unless this run is a no-op.
func (j *jobRun) hook(ctx context.Context, kind, step string, p progress, stepErr error) error {
	if j.Hooks == nil || j.noop {
		return nil
	}
	c := HookContext{Target: j.ref, Situation: p.situation(), Node: j.Node, ValuesHash: p.want().ValuesHash}
	if p.resolved != nil {
		c.From, c.To = p.resolved.From, p.resolved.To
	}
	return j.Hooks.Run(ctx, kind, step, c, stepErr)
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
	} else if p.plan != nil {
		j.entry.ValuesHash = p.plan.Merge.SHA256
	}
	if p.verified {
		j.entry.Completed = true
	}
	j.entry.Phases[step] = Step{FinishedAt: time.Now().UTC(), Duration: d.String()}
	return j.Journal.Save(*j.entry)
}
