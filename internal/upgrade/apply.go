package upgrade

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultLeaseDuration is how long a holder that stopped renewing keeps the
// Lease when Settings.LeaseDuration is not > 0.
const DefaultLeaseDuration = 30 * time.Second

// maxConflicts bounds the re-read, re-merge, retry loop of an apply.
const maxConflicts = 10

// Applied is the output of apply: what was written (or found written by
// another process) and the target as it stands after.
type Applied struct {
	Obs  *Observed
	Want Want
	// Situation is applied when the target now carries an apply of ours
	// for the version; "" when there was nothing to write.
	Situation Situation
}

// apply makes exactly one process in the cluster write the target: it
// takes the Lease (or waits while another process applies), backs the
// target up once, then makes one write with the revision it read. On a
// conflict it re-reads, merges again and retries, so a concurrent change
// is never lost. Nothing to change, or applied meanwhile → no write.
//
// It gives the Lease up as soon as the target carries the record of the
// apply: from then on that record tells every other process what was
// done, so holding the Lease through the wait would only cost renewals.
func (j *jobRun) apply(ctx context.Context, r Resolved, p *Plan) (*Applied, error) {
	if p != nil && p.NoChange {
		j.Log.Info(fmt.Sprintf("nothing to change: the %s already has this version and these values", j.ref.Kind))
		return &Applied{Obs: r.Obs, Want: p.Want}, nil
	}
	a, err := j.takeLease(ctx, r, p)
	if err != nil || a != nil {
		return a, err
	}
	if a, err = j.write(ctx, r, p); err != nil {
		// give the Lease up: another node need not wait for it to expire
		if rerr := j.releaseLease(context.WithoutCancel(ctx)); rerr != nil {
			j.Log.Warn("could not give the lease up after a failed apply", "error", rerr.Error())
		}
		return nil, err
	}
	return a, j.releaseLease(ctx)
}

// write is the apply proper, once this process holds the Lease: the
// target is re-read first (the previous holder may have applied it).
func (j *jobRun) write(ctx context.Context, r Resolved, p *Plan) (*Applied, error) {
	o, p, done, err := j.reread(ctx, r, p)
	if err != nil || done != nil {
		return done, err
	}
	if r.Restore == nil {
		name, created, err := j.job.Target.Backup(ctx, o)
		if err != nil {
			return nil, err
		}
		if created {
			j.Log.Info("backup written", "secret", name)
		}
	}
	for attempt := 1; ; attempt++ {
		select {
		case <-j.leaseLost:
			return nil, fmt.Errorf("lost the lease %s to another process before writing", LeaseName(j.ref))
		default:
		}
		want := r.Want
		c := Change{Version: r.To, Restore: r.Restore}
		if r.Restore == nil {
			want = p.Want
			c.Values, c.Chart = p.Merge.Values, r.New
		}
		c.Record = Record{Version: r.To, ValuesHash: want.ValuesHash, AppliedAt: time.Now().UTC().Format(time.RFC3339), PreviousVersion: r.From}
		now, err := j.job.Target.Apply(ctx, o, c)
		if err == nil {
			j.wrote = true
			j.Log.Info("applied", "version", r.To, "values_sha256", want.ValuesHash, "attempts", attempt)
			return &Applied{Obs: now, Want: want, Situation: SituationApplied}, nil
		}
		if !errors.Is(err, ErrConflict) || attempt == maxConflicts {
			return nil, err
		}
		j.Log.Info(fmt.Sprintf("the %s changed since it was read: re-reading and merging again", j.ref.Kind), "attempt", attempt)
		if o, p, done, err = j.reread(ctx, r, p); err != nil || done != nil {
			return done, err
		}
	}
}

// reread reads the target again. When it now carries our apply of the
// version (another process's, or ours before a crash), or has nothing to
// change, the apply is done. Otherwise it merges again on what the target
// holds now, unless that is what the merge read (a rollback restores the
// backup as it is).
func (j *jobRun) reread(ctx context.Context, r Resolved, p *Plan) (*Observed, *Plan, *Applied, error) {
	o, err := j.job.Target.Read(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if o == nil {
		return nil, nil, nil, fmt.Errorf("%s disappeared", j.ref)
	}
	if o.AppliedHere(r.To) {
		w, _ := o.Applied.Want()
		return o, p, &Applied{Obs: o, Want: w, Situation: SituationApplied}, nil
	}
	if r.Restore != nil || (p != nil && p.key == mergeKey(o)) {
		return o, p, nil, nil
	}
	np, err := j.plan(ctx, r, o)
	if err != nil {
		return nil, nil, nil, err
	}
	if np.NoChange {
		return o, np, &Applied{Obs: o, Want: np.Want}, nil
	}
	return o, np, nil, nil
}

// takeLease returns once this process holds the target's Lease (nil: go
// on and write; it then renews it until the apply gives it up), or once
// another process has applied the target (its Applied). While another live
// process holds it, it watches the target, and tries again when the
// holder's Lease may have expired.
func (j *jobRun) takeLease(ctx context.Context, r Resolved, p *Plan) (*Applied, error) {
	j.lease = j.Cluster.Lease(j.ref.Namespace, LeaseName(j.ref), j.leaseAnnotations(r.To))
	for {
		held, holder, err := j.lease.TryAcquire(ctx)
		if err != nil {
			return nil, err
		}
		if held {
			j.leader = true
			j.stopLease, j.leaseLost = j.lease.Hold(ctx)
			return nil, nil
		}
		j.Log.Info("another process is applying this target; waiting for it", "holder", holder)
		a, err := j.waitForOther(ctx, r)
		if err != nil || a != nil {
			return a, err
		}
	}
}

// waitForOther watches the target until another process has applied it
// (its Applied) or the Lease may have expired (nil: try to take it).
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
			want, _ := o.Applied.Want()
			j.Log.Info("another process applied the target", "version", want.Version)
			return &Applied{Obs: o, Want: want, Situation: SituationApplied}, nil
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

// releaseLease stops renewing the Lease and gives it up, once per run.
// Releasing a Lease this node does not hold writes nothing.
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

// LeaseName is the coordination Lease of a target, in its namespace, cut
// to a valid name.
func LeaseName(r Ref) string {
	name := "chart-upgrader-" + r.Name
	if r.Kind != "managedchart" {
		name = "chart-upgrader-" + r.Kind + "-" + r.Name
	}
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}
