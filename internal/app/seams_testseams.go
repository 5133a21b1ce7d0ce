//go:build testseams

package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// This file is built only with -tags testseams (scripts/test does): the
// release binary holds none of it (tests/image proves it).

// Seams are test-only fault switches of one command run.
type Seams struct {
	// WrapTransport wraps the API client transport (tests count requests).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// BeforeApply runs before each write of the target: a test changes the
	// target between our read and our write.
	BeforeApply func(ctx context.Context, attempt int)
}

type seamsKey struct{}

// WithSeams returns a context that gives the command run the seams.
func WithSeams(ctx context.Context, s Seams) context.Context {
	return context.WithValue(ctx, seamsKey{}, s)
}

func seamsOf(ctx context.Context) Seams {
	s, _ := ctx.Value(seamsKey{}).(Seams)
	return s
}

func wrapConfig(ctx context.Context, cfg *rest.Config) {
	if w := seamsOf(ctx).WrapTransport; w != nil {
		cfg.Wrap(w)
	}
}

func wrapTarget(ctx context.Context, t upgrade.Target) upgrade.Target {
	if f := seamsOf(ctx).BeforeApply; f != nil {
		return &beforeApply{Target: t, f: f}
	}
	return t
}

// beforeApply calls f before each Apply of the target.
type beforeApply struct {
	upgrade.Target
	f        func(ctx context.Context, attempt int)
	attempts int
}

func (b *beforeApply) Apply(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (*upgrade.Observed, error) {
	b.attempts++
	b.f(ctx, b.attempts)
	return b.Target.Apply(ctx, o, c)
}

// Drift is the wrapped target's drift, when it can compare its objects.
func (b *beforeApply) Drift(ctx context.Context, o *upgrade.Observed, deployed *upgrade.Chart) (upgrade.DriftReport, error) {
	if d, ok := b.Target.(upgrade.Drifter); ok {
		return d.Drift(ctx, o, deployed)
	}
	return upgrade.DriftReport{}, fmt.Errorf("%s cannot compare its objects with what it deployed", b.Ref())
}

// Conflicts is the wrapped target's conflict check, when it has one.
func (b *beforeApply) Conflicts(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (upgrade.Conflicts, error) {
	if cc, ok := b.Target.(upgrade.ConflictChecker); ok {
		return cc.Conflicts(ctx, o, c)
	}
	return upgrade.Conflicts{}, nil
}

// CrashAfterEnv names a step after whose journal record the process kills
// itself with SIGKILL: the crash-and-resume tests and the soak set it.
const CrashAfterEnv = "CHART_UPGRADER_TEST_CRASH_AFTER"

func wrapJournal(_ context.Context, j upgrade.Journal) upgrade.Journal {
	if step := os.Getenv(CrashAfterEnv); step != "" {
		return crashJournal{Journal: j, step: step, start: time.Now().UTC()}
	}
	return j
}

// crashJournal kills the process once the step named by CrashAfterEnv is
// recorded: the first save holding that step as finished by this process
// (the wait's record is saved with verify's).
type crashJournal struct {
	upgrade.Journal
	step  string
	start time.Time
}

func (c crashJournal) Save(e upgrade.Entry) error {
	if err := c.Journal.Save(e); err != nil {
		return err
	}
	if s, ok := e.Phases[c.step]; ok && !s.FinishedAt.Before(c.start) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return nil
}
