package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// wait waits, by watch, until the target is ready for want. It prints
// progress while waiting; running out of the job's time is
// outcome.ErrTimeout (exit 4).
func (j *jobRun) wait(ctx context.Context, want Want) (*Readiness, error) {
	timeout := j.job.Timeout
	if timeout <= 0 {
		return nil, fmt.Errorf("%s: no wait timeout given for the job", j.ref)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timedOut := func(err error) bool { return errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil }
	w, err := j.observe(wctx)
	if err != nil {
		if timedOut(err) {
			return nil, outcome.Timeout(fmt.Errorf("could not watch %s within %s: %w", j.ref, timeout, err))
		}
		return nil, err
	}
	start := time.Now()
	opts := WaitOptions{Heartbeat: j.Heartbeat, FailureGrace: j.job.FailureGrace, PodFailureGrace: j.job.PodFailureGrace, Settle: j.job.Settle,
		Progress: func(r Readiness) {
			j.note("waiting", "progress", r.Progress(), "elapsed", time.Since(start).Round(time.Second).String())
		}}
	if j.job.Pods != nil && j.job.PodFailureGrace > 0 {
		if opts.Pods, err = j.podWatch(wctx, w.Current(), want); err != nil {
			if timedOut(err) {
				return nil, outcome.Timeout(fmt.Errorf("could not watch the pods of %s within %s: %w", j.ref, timeout, err))
			}
			return nil, err
		}
	}
	r, err := WaitReady(wctx, w, want, opts)
	j.lastGates = r.Gates
	if errors.Is(err, ErrPodFailed) && r.Settling {
		return nil, j.revert(ctx, want, fmt.Errorf("%s was ready at version %s, but a container crashed within %s (wait.settle): %s", j.ref, want.Version,
			j.job.Settle, r.PodFailed))
	}
	if errors.Is(err, ErrPodFailed) {
		return nil, j.revert(ctx, want, fmt.Errorf("%s cannot start version %s: %s, for %s (wait.podFailureGrace)", j.ref, want.Version,
			r.PodFailed, j.job.PodFailureGrace))
	}
	if bad := r.badGate(); errors.Is(err, ErrFailed) && bad != "" {
		// the spec is wrong, not the upgrade: nothing to undo
		return nil, outcome.BadInput(fmt.Errorf("%s is applied at version %s, but a health gate cannot be judged: %s; "+
			"correct the gate in the spec and run again: the next run waits without applying again", j.ref, want.Version, bad))
	}
	if errors.Is(err, ErrFailed) && r.gateFailed() {
		return nil, j.revert(ctx, want, fmt.Errorf("%s is ready at version %s, but a health gate failed: %s", j.ref, want.Version, r.Failed))
	}
	if errors.Is(err, ErrFailed) {
		return nil, j.revert(ctx, want, fmt.Errorf("%s failed to deploy version %s: %s\n  %s", j.ref, want.Version, r.Failed,
			strings.Join(r.NonReady, "\n  ")))
	}
	if err != nil {
		if timedOut(err) {
			lines := append(append([]string(nil), r.Waiting...), r.NonReady...)
			if r.Failed != "" {
				lines = append([]string{"failed: " + r.Failed}, lines...)
			}
			return nil, j.revert(ctx, want, outcome.Timeout(fmt.Errorf("%s not ready after %s waiting for version %s:\n  %s",
				j.ref, timeout, want.Version, strings.Join(lines, "\n  "))))
		}
		return nil, err
	}
	return &r, nil
}

// ErrFailed is WaitReady's error when the target kept reporting a failure
// (Readiness.Failed) for the whole WaitOptions.FailureGrace.
var ErrFailed = errors.New("the target reports a failure")

// ErrPodFailed is WaitReady's error when a container of the new revision
// could not start for the whole WaitOptions.PodFailureGrace
// (Readiness.PodFailed).
var ErrPodFailed = errors.New("a pod of the new revision cannot start")

// WaitOptions tune WaitReady.
type WaitOptions struct {
	// Heartbeat is how often progress is called while nothing changes
	// (0: every 10s).
	Heartbeat time.Duration
	// FailureGrace is how long a reported failure may last before
	// WaitReady gives up with ErrFailed; 0 never gives up on one.
	FailureGrace time.Duration
	// Progress (nil: none) is called with every judgement that reads
	// differently from the one before, and at least every Heartbeat.
	Progress func(Readiness)
	// Pods (nil: none) are the new revision's pods: a container that
	// cannot start for PodFailureGrace without a break ends the wait with
	// ErrPodFailed; 0 never ends it so (each is still shown).
	Pods            PodWatch
	PodFailureGrace time.Duration
	// Settle (0: none) is how long the target must stay ready, with Pods,
	// before the wait ends in success: a container of the new revision
	// that crashes meanwhile ends it with ErrPodFailed (Readiness.Settling).
	// A container without a readiness probe is Ready between two crashes.
	Settle time.Duration
}

// WaitReady returns when the watch judges the target ready for want; when
// the target has reported a failure for o.FailureGrace without a break
// (then with that judgement and ErrFailed); or when ctx ends (then with
// the last judgement and ctx's error).
func WaitReady(ctx context.Context, w Watch, want Want, o WaitOptions) (Readiness, error) {
	progress, heartbeat := o.Progress, o.Heartbeat
	if progress == nil {
		progress = func(Readiness) {}
	}
	if heartbeat <= 0 {
		heartbeat = 10 * time.Second
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	last := ""
	var failedSince time.Time // when the current failure was first seen
	var graceOver <-chan time.Time
	pods := newPodClock(o.Pods, o.PodFailureGrace)
	defer pods.stop()
	settle := o.Settle
	if o.Pods == nil {
		settle = 0
	}
	var settleStart time.Time // when the target was first seen ready, while settling
	var settleOver <-chan time.Time
	settled := false
	for {
		r := w.Readiness(want)
		if r.Ready && (settle <= 0 || o.Pods.Podless()) {
			return r, nil // nothing to settle
		}
		if failed := pods.judge(&r); failed {
			progress(r)
			return r, ErrPodFailed
		}
		switch {
		case r.Ready && settleStart.IsZero():
			settleStart, settled = pods.judged, false // a crash seen in this look counts
			settleOver = time.After(settle)
		case !r.Ready:
			settleStart, settleOver, settled = time.Time{}, nil, false
		}
		if r.Ready {
			if f := pods.crashedSince(settleStart); f != nil {
				r.PodFailed, r.Settling = f, true
				progress(r)
				return r, ErrPodFailed
			}
			if settled {
				return r, nil
			}
			r.Wait("ready; settling for %s (wait.settle): no container of the new revision may crash meanwhile", settle)
		}
		if r.Failed != "" && r.Terminal {
			progress(r)
			return r, ErrFailed
		}
		switch {
		case r.Failed == "" || o.FailureGrace <= 0:
			failedSince, graceOver = time.Time{}, nil
		case failedSince.IsZero():
			failedSince = time.Now()
			graceOver = time.After(o.FailureGrace)
		}
		if p := r.Progress(); p != last {
			progress(r)
			last = p
		}
		select {
		case <-ctx.Done():
			if r.Ready && !settleStart.IsZero() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// ready, and no crash for as much of the settle as the
				// wait's timeout left: a short timeout is not a failure
				return r, nil
			}
			return r, ctx.Err()
		case <-graceOver:
			if r = w.Readiness(want); r.Ready {
				return r, nil
			}
			if r.Failed != "" {
				return r, ErrFailed
			}
			failedSince, graceOver = time.Time{}, nil
		case <-settleOver:
			settled, settleOver = true, nil
		case <-w.Changed():
		case <-pods.changed():
		case <-pods.due():
		case <-tick.C:
			progress(r)
		}
	}
}

// podClock times how long each of the new revision's containers has been
// failing, without a break, against the grace. A container that crashed
// and runs again (PodFailure.Running) breaks the run only once its restart
// count has not risen for a whole grace: the kubelet shows a crash loop
// as running, terminated, back-off, running …, and every write counts.
type podClock struct {
	w     PodWatch
	grace time.Duration
	since map[string]time.Time   // by PodFailure.Key: failing without a break since
	seen  map[string]podRestarts // by PodFailure.Key: the restart count and when it was last seen to rise
	timer *time.Timer
	// crashed is the crash seen last (a container exited non-zero, or
	// its restart count rose after such an exit) and when.
	crashed   *PodFailure
	crashedAt time.Time
	now       func() time.Time // time.Now; a test's clock
	judged    time.Time        // the time of the last judge
}

// podRestarts is one container's restart count as last seen, whether it
// was running then, and when a crash of it was last seen (zero: none
// since the watch began).
type podRestarts struct {
	count   int32
	running bool
	rose    time.Time
	crashes int // seen while failing without a break
}

func newPodClock(w PodWatch, grace time.Duration) *podClock {
	return &podClock{w: w, grace: grace, since: map[string]time.Time{}, seen: map[string]podRestarts{}, now: time.Now}
}

// judge puts the failing containers into r and says whether one has
// failed for the whole grace (then r.PodFailed); it sets the timer for the
// next to run out.
func (c *podClock) judge(r *Readiness) bool {
	if c.w == nil {
		return false
	}
	now := c.now()
	c.judged = now
	all := c.w.Failing()
	r.Failing = nil
	for _, f := range all {
		if c.failing(f, now) {
			r.Failing = append(r.Failing, f)
		}
	}
	keys := map[string]bool{}
	for _, f := range all {
		keys[f.Key()] = true
	}
	for key := range c.seen {
		if !keys[key] {
			delete(c.seen, key)
		}
	}
	failing := map[string]bool{}
	next := time.Duration(-1)
	for i, f := range r.Failing {
		key := f.Key()
		failing[key] = true
		since, ok := c.since[key]
		if !ok {
			since = now
			c.since[key] = now
		}
		if c.grace <= 0 {
			continue
		}
		left := c.grace - now.Sub(since)
		if left <= 0 && f.Running && c.seen[key].crashes < 2 {
			// it crashed once and runs again: failing only if it crashes
			// again while its last crash is within the grace
			left = c.grace - now.Sub(c.seen[key].rose)
		} else if left <= 0 {
			r.PodFailed = &r.Failing[i]
			return true
		}
		if next < 0 || left < next {
			next = left
		}
	}
	for key := range c.since {
		if !failing[key] {
			delete(c.since, key)
			if rs, ok := c.seen[key]; ok {
				rs.crashes = 0
				c.seen[key] = rs
			}
		}
	}
	c.stop()
	if next >= 0 {
		c.timer = time.NewTimer(next)
	}
	return false
}

// failing notes f's restart count and says whether f is failing now: a
// container that cannot start is; one running again after a crash is
// while a crash was seen within the grace. A crash is seen when a
// container is first seen exited non-zero or backing off, when it is seen
// so again after running, and when its restart count rose between two
// looks that saw it the same (the kubelet may count the restart when it
// backs off or when it starts the container again).
func (c *podClock) failing(f PodFailure, now time.Time) bool {
	key := f.Key()
	prev, known := c.seen[key]
	rs := podRestarts{count: f.Restarts, running: f.Running, rose: prev.rose}
	crash := f.Crashed && ((!known && !f.Running) || // first seen down after a crash
		(known && prev.running && !f.Running) || // down again after running
		(known && prev.running == f.Running && f.Restarts > prev.count)) // a restart between two looks
	rs.crashes = prev.crashes
	if crash {
		rs.rose, rs.crashes = now, rs.crashes+1
		cp := f
		c.crashed, c.crashedAt = &cp, now
	}
	c.seen[key] = rs
	if !f.Running {
		return true
	}
	return !rs.rose.IsZero() && (c.grace <= 0 || now.Sub(rs.rose) < c.grace)
}

// crashedSince is the crash seen at or after t, if any.
func (c *podClock) crashedSince(t time.Time) *PodFailure {
	if c.crashed != nil && !c.crashedAt.Before(t) {
		return c.crashed
	}
	return nil
}

func (c *podClock) changed() <-chan struct{} {
	if c.w == nil {
		return nil
	}
	return c.w.Changed()
}

func (c *podClock) due() <-chan time.Time {
	if c.timer == nil {
		return nil
	}
	return c.timer.C
}

func (c *podClock) stop() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// revert lets a target that can undo a failed apply (Job.Revert) do so
// after the wait ended with err, and adds what it did to err, whose exit
// code stays err's.
func (j *jobRun) revert(ctx context.Context, want Want, err error) error {
	if j.job.Revert == nil {
		return err
	}
	did, rerr := j.job.Revert.RevertFailed(ctx, want)
	switch {
	case rerr != nil:
		return fmt.Errorf("%w\n  and undoing the apply failed: %v", err, rerr)
	case did != "":
		return fmt.Errorf("%w\n  %s", err, did)
	}
	return err
}
