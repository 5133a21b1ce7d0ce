package phase

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/journal"
)

// Phase is one idempotent step of an upgrade: re-running it after it
// succeeded makes no writes.
type Phase interface {
	Name() string
	Run(ctx context.Context, s *State) error
}

// upgradePhases is the whole upgrade of one chart, in order.
func upgradePhases() []Phase {
	return []Phase{
		resolvePhase{},   // the target version; the new and the deployed chart; the situation
		preflightPhase{}, // checks, no writes: one actionable line per refusal
		mergePhase{},     // decide every value; journal the result
		applyPhase{},     // one process (Lease, until its write) backs up the spec once and updates it
		waitPhase{},      // by watch, until the applied version is ready
		verifyPhase{},    // record completion, report; a Lease a killed run of this node left behind
	}
}

// preflightPhases only look.
func preflightPhases() []Phase {
	return []Phase{resolvePhase{}, preflightPhase{}}
}

// crashAfterEnv names a phase after which the process kills itself with
// SIGKILL: a test-only fault switch for crash-and-resume tests.
const crashAfterEnv = "CHART_UPGRADER_TEST_CRASH_AFTER"

// run runs the phases on s in order and stops at the first error. It owns
// what is common to them: timing, one log line per phase start and end,
// the journal, Events.
func run(ctx context.Context, s *State, phases []Phase) error {
	log := s.Opts.Log.With("target", s.Ref())
	for _, p := range phases {
		if err := s.hooks.run(ctx, s, "pre", p.Name(), nil); err != nil {
			log.Error("pre hook failed", "phase", p.Name(), "error", err.Error())
			return fmt.Errorf("%s: %w", s.Ref(), err)
		}
		start := time.Now()
		log.Info("phase start", "phase", p.Name())
		err := p.Run(ctx, s)
		d := time.Since(start).Round(time.Millisecond)
		if p.Name() == "resolve" && err == nil && s.Situation == SituationDone {
			s.noop = true
		}
		if herr := s.hooks.run(ctx, s, "post", p.Name(), err); herr != nil {
			log.Error("post hook failed", "phase", p.Name(), "error", herr.Error())
			s.hookFailures = append(s.hookFailures, herr.Error())
		}
		if err != nil {
			log.Error("phase failed", "phase", p.Name(), "duration", d.String(), "error", err.Error())
			s.events.Phase(ctx, s, p.Name(), err)
			return fmt.Errorf("%s: %s: %w", s.Ref(), p.Name(), err)
		}
		log.Info("phase done", "phase", p.Name(), "duration", d.String(), "situation", string(s.Situation))
		s.events.Phase(ctx, s, p.Name(), nil)
		if err := s.saveJournal(p.Name(), journal.Record{FinishedAt: time.Now().UTC(), Duration: d.String()}); err != nil {
			return fmt.Errorf("%s: journal after %s: %w", s.Ref(), p.Name(), err)
		}
		if os.Getenv(crashAfterEnv) == p.Name() {
			log.Warn("test fault switch: killing this process", "after", p.Name())
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	return nil
}
