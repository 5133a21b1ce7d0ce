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
		timeout = 20 * time.Minute
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
	r, err := WaitReady(wctx, w, want, j.Heartbeat, func(r Readiness) {
		j.Log.Info("waiting", "progress", r.Progress(), "elapsed", time.Since(start).Round(time.Second).String())
	})
	if err != nil {
		if timedOut(err) {
			return nil, outcome.Timeout(fmt.Errorf("%s not ready after %s waiting for version %s:\n  %s",
				j.ref, timeout, want.Version, strings.Join(append(r.Waiting, r.NonReady...), "\n  ")))
		}
		return nil, err
	}
	j.Log.Info("ready", "version", want.Version, "clusters", fmt.Sprintf("%d/%d", r.ReadyCount, r.DesiredCount),
		"waited", time.Since(start).Round(time.Millisecond).String())
	return &r, nil
}

// WaitReady returns when the watch judges the target ready for want, or
// when ctx ends (then with the last judgement and ctx's error). progress
// (nil: none) is called with every judgement that reads differently from
// the one before, and at least every heartbeat.
func WaitReady(ctx context.Context, w Watch, want Want, heartbeat time.Duration, progress func(Readiness)) (Readiness, error) {
	if progress == nil {
		progress = func(Readiness) {}
	}
	if heartbeat <= 0 {
		heartbeat = 10 * time.Second
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	last := ""
	for {
		r := w.Readiness(want)
		if r.Ready {
			return r, nil
		}
		if p := r.Progress(); p != last {
			progress(r)
			last = p
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-w.Changed():
		case <-tick.C:
			progress(r)
		}
	}
}
