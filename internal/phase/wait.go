package phase

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
)

// waitPhase waits, by watch, until the target is ready for what was applied
// (DESIGN §5 "wait"; target.Evaluate). It prints progress while waiting;
// running out of time is outcome.ErrTimeout (exit 4).
type waitPhase struct{}

func (waitPhase) Name() string { return "wait" }

func (waitPhase) Run(ctx context.Context, s *State) error {
	if s.Situation == SituationDone {
		return nil
	}
	return waitReady(ctx, s, s.Want)
}

func waitReady(ctx context.Context, s *State, want target.Want) error {
	timeout := s.Chart.Wait.Timeout
	if s.Opts.Timeout > 0 {
		timeout = s.Opts.Timeout
	}
	if timeout <= 0 {
		timeout = 20 * time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	obs, err := observe(wctx, s)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return outcome.Timeout(fmt.Errorf("could not watch %s within %s: %w", s.Ref(), timeout, err))
		}
		return err
	}
	start := time.Now()
	r, err := obs.WaitReady(wctx, want, s.Opts.Heartbeat, func(r target.Readiness) {
		s.Opts.Log.Info("waiting", "progress", r.Progress(), "elapsed", time.Since(start).Round(time.Second).String())
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return outcome.Timeout(fmt.Errorf("%s not ready after %s waiting for version %s:\n  %s",
				s.Ref(), timeout, want.Version, strings.Join(append(r.Waiting, r.NonReady...), "\n  ")))
		}
		return err
	}
	s.Situation = SituationDone
	s.Opts.Log.Info("ready", "version", want.Version, "clusters", fmt.Sprintf("%d/%d", r.ReadyClusters, r.DesiredClusters),
		"waited", time.Since(start).Round(time.Millisecond).String())
	return nil
}
