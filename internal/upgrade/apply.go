package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// DefaultLeaseDuration is how long a holder that stopped renewing keeps the
// Lease when Settings.LeaseDuration is not > 0.
const DefaultLeaseDuration = 30 * time.Second

// maxConflicts bounds the attempts of an apply: each write that loses to a
// concurrent change is followed by a new read, a new intent and a new
// attempt.
const maxConflicts = 10

// Applied is the output of apply: the target as it stands after it, and
// whether this process wrote it.
type Applied struct {
	Obs  *Observed
	Want Want // what was written (zero when nothing was)
	// Wrote: this process wrote the intent; the target carries its record.
	Wrote bool
	// Stale: nothing was written, because the target read under the Lease
	// (or after a lost write) is not the one the intent was made on:
	// another process applied it, or someone changed it. Situation says
	// where it stands now; next merges again, applies again or waits.
	Stale     bool
	Situation Situation
}

// apply makes exactly one process in the cluster write the target: it
// takes the Lease (or, while another live process holds it, watches the
// target until that process has applied it), reads the target again,
// backs it up once when the intent says so, and makes one write with the
// revision it read. It writes the intent exactly as next handed it over;
// when the target is no longer what the intent was made on, or the write
// loses to a concurrent change, it writes nothing and says so (Stale).
//
// It gives the Lease up as soon as the target carries the record of the
// write: from then on that record tells every other process what was
// done, so holding the Lease through the wait would only cost renewals.
// After a Stale apply it keeps the Lease for the next attempt; the runner
// gives it up if no attempt follows.
//
// fresh is the target as read under the Lease by the previous attempt,
// when the intent was made again on it (nil: read it now).
func (j *jobRun) apply(ctx context.Context, r Resolved, in *Intent, fresh *Observed, attempt int) (*Applied, error) {
	if attempt > maxConflicts {
		return nil, j.giveUp(ctx, fmt.Errorf("the %s kept changing: %d attempts to write it lost: %w", j.ref.Kind, maxConflicts, ErrConflict))
	}
	if !j.holdsLease() {
		a, err := j.takeLease(ctx, r)
		if err != nil || a != nil {
			return a, err
		}
	}
	a, err := j.write(ctx, r, in, fresh)
	if err != nil {
		return nil, j.giveUp(ctx, err)
	}
	if a.Wrote {
		return a, j.releaseLease(ctx)
	}
	return a, nil
}

// giveUp gives the Lease up after a failed apply, so that another node
// need not wait for it to expire, and returns err.
func (j *jobRun) giveUp(ctx context.Context, err error) error {
	if rerr := j.releaseLease(context.WithoutCancel(ctx)); rerr != nil {
		return fmt.Errorf("%w (and giving the lease %s up failed: %v)", err, j.job.Lease, rerr)
	}
	return err
}

// write is the apply proper, once this process holds the Lease.
func (j *jobRun) write(ctx context.Context, r Resolved, in *Intent, fresh *Observed) (*Applied, error) {
	o := fresh
	if o == nil {
		var err error
		if o, err = j.reread(ctx); err != nil {
			return nil, err
		}
		// the previous holder may have applied it, or someone changed it
		if stale := j.stale(o, r, in); stale != nil {
			return stale, nil
		}
	}
	if in.BackupFirst {
		name, created, err := j.job.Target.Backup(ctx, o)
		if err != nil {
			return nil, err
		}
		if created {
			j.note("backup written", "secret", name)
		}
	}
	select {
	case <-j.leaseLost:
		return nil, fmt.Errorf("lost the lease %s to another process before writing", j.job.Lease)
	default:
	}
	if err := j.applyCRDs(ctx, r, in, o); err != nil {
		return nil, err
	}
	now, err := j.applyWatched(ctx, o, in.stamped(), in.Want)
	if errors.Is(err, ErrPodFailed) {
		return nil, err
	}
	if err == nil {
		j.wrote = true
		return &Applied{Obs: now, Want: in.Want, Wrote: true, Situation: SituationApplied}, nil
	}
	if !errors.Is(err, ErrConflict) {
		return nil, err
	}
	j.note(fmt.Sprintf("the %s changed since it was read", j.ref.Kind))
	if o, err = j.reread(ctx); err != nil {
		return nil, err
	}
	return &Applied{Obs: o, Stale: true, Situation: Assess(o, r.To, false)}, nil
}

// applyWatched is Target.Apply with the new revision's pods watched from
// its start: Helm runs a release's pre-upgrade hooks inside the apply and
// waits for them, so a hook's pod that cannot start (an image the node
// cannot pull) would end it only at Helm's hook timeout, unnamed. One that
// fails for the whole wait.podFailureGrace stops the apply, and the error
// (ErrPodFailed, exit 1) names it as the wait names the release's own.
func (j *jobRun) applyWatched(ctx context.Context, o *Observed, c Change, want Want) (*Observed, error) {
	if j.job.Pods == nil || j.job.PodFailureGrace <= 0 {
		return j.job.Target.Apply(ctx, o, c)
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	pw, err := j.podWatch(ctx, o, want)
	if err != nil || pw == nil {
		return j.job.Target.Apply(ctx, o, c) // the wait watches them, or says why it cannot
	}
	failed := make(chan PodFailure, 1)
	go func() {
		clock := newPodClock(pw, j.job.PodFailureGrace)
		defer clock.stop()
		for {
			var r Readiness
			if clock.judge(&r) {
				failed <- *r.PodFailed
				cancel()
				return
			}
			select {
			case <-actx.Done():
				return
			case <-clock.changed():
			case <-clock.due():
			}
		}
	}()
	now, err := j.job.Target.Apply(actx, o, c)
	cancel()
	if err == nil {
		return now, nil
	}
	select {
	case f := <-failed:
		j.wrote = true // the apply began: a failed revision may be left to undo
		return nil, j.revert(ctx, want, fmt.Errorf("%w: %s stopped applying version %s: %s, for %s (wait.podFailureGrace)",
			ErrPodFailed, j.ref, want.Version, f, j.job.PodFailureGrace))
	default:
	}
	return nil, err
}

// stale is the Stale output for o when it is not the target the intent
// was made on (nil when it is): it carries an apply of ours of the
// version, or (for an intent made from the target's values) it changed.
func (j *jobRun) stale(o *Observed, r Resolved, in *Intent) *Applied {
	sit := Assess(o, r.To, false)
	if sit.ours() || (in.Remerge && mergeKey(o) != in.key) {
		return &Applied{Obs: o, Stale: true, Situation: sit}
	}
	return nil
}

// reread reads the target, which must still exist.
func (j *jobRun) reread(ctx context.Context) (*Observed, error) {
	o, err := j.job.Target.Read(ctx)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, fmt.Errorf("%s disappeared", j.ref)
	}
	return o, nil
}

// takeLease returns once this process holds the target's Lease (nil: go
// on and write; it then renews it until it is given up), or once another
// process has applied the target (a Stale Applied that says so). While
// another live process holds it, it watches the target, and tries again
// when the holder's Lease may have expired.
func (j *jobRun) takeLease(ctx context.Context, r Resolved) (*Applied, error) {
	j.lease = j.Cluster.Lease(j.ref.Namespace, j.job.Lease, j.leaseAnnotations(r.To))
	for {
		held, holder, err := j.lease.TryAcquire(ctx)
		if err != nil {
			return nil, err
		}
		if held {
			j.leader, j.leaseFreed = true, false
			j.stopLease, j.leaseLost = j.lease.Hold(ctx)
			return nil, nil
		}
		j.note("another process is applying this target; waiting for it", "holder", holder)
		a, err := j.waitForOther(ctx, r)
		if err != nil || a != nil {
			return a, err
		}
	}
}

// waitForOther watches the target until another process has applied it
// (a Stale Applied with its situation) or the Lease may have expired
// (nil: try to take it).
func (j *jobRun) waitForOther(ctx context.Context, r Resolved) (*Applied, error) {
	w, err := j.observe(ctx)
	if err != nil {
		return nil, err
	}
	d := j.LeaseDuration
	if d <= 0 {
		d = DefaultLeaseDuration
	}
	retry := time.NewTimer(d / 2)
	defer retry.Stop()
	for {
		if o := w.Current(); o != nil && o.AppliedHere(r.To) {
			return &Applied{Obs: o, Stale: true, Situation: SituationApplied}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.Changed():
		case <-retry.C:
			return nil, nil
		}
	}
}

// leaseAnnotations name the Job holding the Lease, for a person reading it.
func (j *jobRun) leaseAnnotations(to string) map[string]string {
	ann := map[string]string{}
	for k, v := range j.LeaseAnnotations {
		ann[k] = v
	}
	if to != "" {
		ann["chart-upgrader.io/version"] = to
	}
	return ann
}

// holdsLease reports whether this run holds the Lease and renews it.
func (j *jobRun) holdsLease() bool { return j.stopLease != nil }

// releaseLease stops renewing the Lease and gives it up, once per taking.
// Releasing a Lease this process does not hold writes nothing.
func (j *jobRun) releaseLease(ctx context.Context) error {
	if j.stopLease != nil {
		j.stopLease()
		j.stopLease = nil
	}
	if j.lease == nil || j.leaseFreed {
		return nil
	}
	if err := j.lease.Release(ctx); err != nil {
		return err
	}
	j.leaseFreed = true
	return nil
}

// applyCRDs creates or replaces the chart's CRDs as the job's apply.crds
// says, before the target is written: with preflight's verdict, or, when
// the intent was made again since, a new one (refused as preflight
// refuses). A rollback (no merge) leaves CRDs as they are: it never
// deletes one nor drops a version objects may be stored at. The CRDs it
// replaces are kept first, as they are, beside the target's backup. Each
// CRD applied is one Event on the target.
func (j *jobRun) applyCRDs(ctx context.Context, r Resolved, in *Intent, o *Observed) error {
	if j.job.CRDs == nil || in.Merge == nil || r.New == nil {
		return nil
	}
	check := in.CRDs
	if check == nil {
		var err error
		if check, err = j.job.CRDs.Check(ctx, r.New, in.Change.Values); err != nil {
			return err
		}
		if len(check.Refused) > 0 {
			return outcome.Refused(fmt.Errorf("applying the CRDs of %s %s:\n- %s", j.ref, r.To, strings.Join(check.Refused, "\n- ")))
		}
	}
	if in.BackupFirst {
		name, created, err := j.job.CRDs.Backup(ctx, check, j.ref, r.From)
		if err != nil {
			return fmt.Errorf("backing up the CRDs the upgrade replaces: %w", err)
		}
		if created {
			j.note("CRDs backed up", "secret", name)
		}
	}
	done, err := j.job.CRDs.Apply(ctx, check)
	for _, a := range done {
		j.crdsApplied = append(j.crdsApplied, a)
		j.note("CRD applied", "crd", a.Name, "action", a.Action, "from", a.From)
		e := Event{Target: j.ref, UID: o.UID, Reason: "CRDApplied", Action: StepApply, Node: j.Node, Reporting: j.Identity,
			Message: fmt.Sprintf("CustomResourceDefinition %s: %s from %s (chart %s)", a.Name, a.Action, a.From, r.To)}
		if j.JobName != "" {
			e.Message += " [" + j.JobName + "]"
		}
		j.Cluster.Event(ctx, e)
	}
	return err
}
