package upgrade

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAssess(t *testing.T) {
	rec := func(v, h string) Record { return Record{Version: v, ValuesHash: h} }
	tests := []struct {
		name  string
		o     Observed
		want  string
		ready bool
		sit   Situation
	}{
		{"older version", Observed{Version: "1.0.0", ValuesHash: "a"}, "2.0.0", false, SituationUpgrade},
		{"older version with an old record", Observed{Version: "1.0.0", ValuesHash: "a", Applied: rec("1.0.0", "a")}, "2.0.0", true, SituationUpgrade},
		{"newer version", Observed{Version: "3.0.0", ValuesHash: "a"}, "2.0.0", false, SituationDowngrade},
		{"v-prefixed newer version", Observed{Version: "v3.0.0", ValuesHash: "a"}, "2.0.0", false, SituationDowngrade},
		{"unparseable versions are an upgrade", Observed{Version: "latest", ValuesHash: "a"}, "2.0.0", false, SituationUpgrade},
		{"same version, no record", Observed{Version: "2.0.0", ValuesHash: "a"}, "2.0.0", true, SituationSameVersion},
		{"same version, values changed since our apply", Observed{Version: "2.0.0", ValuesHash: "b", Applied: rec("2.0.0", "a")}, "2.0.0", true, SituationSameVersion},
		{"same version, record without a hash", Observed{Version: "2.0.0", ValuesHash: "a", Applied: rec("2.0.0", "")}, "2.0.0", true, SituationSameVersion},
		{"applied by us, not ready", Observed{Version: "2.0.0", ValuesHash: "a", Applied: rec("2.0.0", "a")}, "2.0.0", false, SituationApplied},
		{"applied by us, ready", Observed{Version: "2.0.0", ValuesHash: "a", Applied: rec("2.0.0", "a")}, "2.0.0", true, SituationDone},
		{"record of the wanted version but the spec moved on", Observed{Version: "3.0.0", ValuesHash: "a", Applied: rec("2.0.0", "a")}, "2.0.0", true, SituationDowngrade},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.sit, Assess(&tt.o, tt.want, tt.ready))
		})
	}
	assert.True(t, SituationApplied.ours())
	assert.True(t, SituationDone.ours())
	for _, s := range []Situation{"", SituationUpgrade, SituationSameVersion, SituationDowngrade} {
		assert.False(t, s.ours(), s)
	}
}

func TestRecordWant(t *testing.T) {
	w, ok := Record{Version: "2.0.0", ValuesHash: "h", AppliedAt: "x", PreviousVersion: "1.0.0"}.Want()
	assert.True(t, ok)
	assert.Equal(t, Want{Version: "2.0.0", ValuesHash: "h"}, w)
	_, ok = Record{Version: "2.0.0"}.Want()
	assert.False(t, ok, "no hash: no complete record")
	_, ok = Record{ValuesHash: "h"}.Want()
	assert.False(t, ok, "no version: no complete record")
}

func TestRefString(t *testing.T) {
	assert.Equal(t, "managedchart/fleet-local/harvester", Ref{"managedchart", "fleet-local", "harvester"}.String())
}

func TestReadinessProgress(t *testing.T) {
	assert.Equal(t, "ready 0/0", Readiness{}.Progress())
	assert.Equal(t, "ready 1/3; waiting: bundle not ready", Readiness{ReadyCount: 1, DesiredCount: 3,
		Waiting: []string{"bundle not ready", "second"}}.Progress())
	assert.Equal(t, "ready 2/3; not ready: deployment/a", Readiness{ReadyCount: 2, DesiredCount: 3,
		NonReady: []string{"deployment/a"}}.Progress())
	assert.Equal(t, "ready 2/3; waiting: w; not ready: deployment/a (+2 more)", Readiness{ReadyCount: 2, DesiredCount: 3,
		Waiting: []string{"w"}, NonReady: []string{"deployment/a", "deployment/b", "deployment/c"}}.Progress())
	var r Readiness
	r.Wait("%d of %s", 2, "three")
	assert.Equal(t, []string{"2 of three"}, r.Waiting)
}

func TestJudgeTarget(t *testing.T) {
	want := Want{Version: "2.0.0", ValuesHash: "h"}
	rec := Record{Version: "2.0.0", ValuesHash: "h"}
	tests := []struct {
		name    string
		o       *Observed
		want    Want
		goOn    bool
		waiting []string
	}{
		{"absent", nil, want, false, []string{"the fake does not exist"}},
		{"as applied", &Observed{Version: "2.0.0", ValuesHash: "h", Applied: rec}, want, true, nil},
		{"another version", &Observed{Version: "1.0.0", ValuesHash: "h", Applied: rec}, want, true,
			[]string{`fake spec.version is "1.0.0", not "2.0.0"`}},
		{"no record", &Observed{Version: "2.0.0", ValuesHash: "h"}, want, true,
			[]string{"fake is not annotated with the applied version and values"}},
		{"values changed since", &Observed{Version: "2.0.0", ValuesHash: "x", Applied: rec}, want, true,
			[]string{"fake values differ from the applied ones (changed by someone else?)"}},
		{"paused", &Observed{Version: "2.0.0", ValuesHash: "h", Applied: rec, Paused: true}, want, true,
			[]string{"fake is paused"}},
		{"nothing written: only the version counts", &Observed{Version: "2.0.0", ValuesHash: "x"}, Want{Version: "2.0.0"}, true, nil},
		{"nothing written, another version", &Observed{Version: "1.0.0"}, Want{Version: "2.0.0"}, true,
			[]string{`fake spec.version is "1.0.0", not "2.0.0"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Readiness
			assert.Equal(t, tt.goOn, JudgeTarget(&r, fakeKind, tt.o, tt.want))
			assert.Equal(t, tt.waiting, r.Waiting)
		})
	}
}

// staticWatch never changes.
type staticWatch struct{ r Readiness }

func (w staticWatch) Current() *Observed       { return nil }
func (w staticWatch) Readiness(Want) Readiness { return w.r }
func (w staticWatch) Changed() <-chan struct{} { return nil }

// WaitReady reports a judgement that does not change at every heartbeat,
// and stops with ctx, returning the last judgement.
func TestWaitReadyHeartbeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	w := staticWatch{Readiness{Waiting: []string{"stuck"}}}
	calls := 0
	r, err := WaitReady(ctx, w, Want{Version: "2.0.0"}, WaitOptions{Heartbeat: time.Millisecond, Progress: func(r Readiness) {
		calls++
		assert.Equal(t, "ready 0/0; waiting: stuck", r.Progress())
		if calls == 3 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.GreaterOrEqual(t, calls, 3, "the first judgement, then a heartbeat with the same one each tick")
	assert.Equal(t, []string{"stuck"}, r.Waiting)

	// ready at once, with no progress callback and the default heartbeat
	r, err = WaitReady(context.Background(), staticWatch{Readiness{Ready: true}}, Want{}, WaitOptions{})
	require.NoError(t, err)
	assert.True(t, r.Ready)
}

// A failure that lasts the grace ends the wait with ErrFailed and the
// failing judgement; without a grace it is waited out like any other.
func TestWaitReadyFailureGrace(t *testing.T) {
	failed := staticWatch{Readiness{Failed: "ErrApplied: boom", Waiting: []string{"1 of 1 not applied"}}}
	r, err := WaitReady(context.Background(), failed, Want{Version: "2.0.0"}, WaitOptions{FailureGrace: time.Millisecond})
	require.ErrorIs(t, err, ErrFailed)
	assert.Equal(t, "ErrApplied: boom", r.Failed)
	assert.Contains(t, r.Progress(), "failed: ErrApplied: boom")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = WaitReady(ctx, failed, Want{Version: "2.0.0"}, WaitOptions{})
	require.ErrorIs(t, err, context.DeadlineExceeded, "no grace: the failure is waited out")
}

// A terminal failure (a failed Job its controller will not run again)
// ends the wait at once, whatever the grace.
func TestWaitReadyTerminalFailure(t *testing.T) {
	failed := staticWatch{Readiness{Failed: "job x failed: BackoffLimitExceeded", Terminal: true}}
	r, err := WaitReady(context.Background(), failed, Want{Version: "2.0.0"}, WaitOptions{FailureGrace: time.Hour})
	require.ErrorIs(t, err, ErrFailed)
	assert.Equal(t, "job x failed: BackoffLimitExceeded", r.Failed)
}

// seqWatch shows its judgements one after another, one per Changed.
type seqWatch struct {
	mu      sync.Mutex
	rs      []Readiness
	changed chan struct{}
}

func (w *seqWatch) Current() *Observed { return nil }
func (w *seqWatch) Readiness(Want) Readiness {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rs[0]
}
func (w *seqWatch) Changed() <-chan struct{} { return w.changed }
func (w *seqWatch) advance() {
	w.mu.Lock()
	w.rs = w.rs[1:]
	w.mu.Unlock()
	w.changed <- struct{}{}
}

// A failure the target's controllers recover from within the grace (the
// agent's retry succeeded) does not end the wait.
func TestWaitReadyFailureRecovers(t *testing.T) {
	w := &seqWatch{changed: make(chan struct{}), rs: []Readiness{
		{Failed: "ErrApplied: flaky"},
		{Waiting: []string{"not ready"}},
		{Ready: true},
	}}
	done := make(chan error, 1)
	go func() {
		_, err := WaitReady(context.Background(), w, Want{}, WaitOptions{FailureGrace: time.Hour})
		done <- err
	}()
	w.advance()
	w.advance()
	require.NoError(t, <-done)
}

func TestLoadVersion(t *testing.T) {
	ctx := context.Background()
	src := newFakeSource(&Chart{Name: "rke2", Version: "1.2.3+rke2r1"}, &Chart{Name: "rke2", Version: "1.2.4"},
		&Chart{Name: "rke2", Version: "v2.0.0+build"})
	c, err := loadVersion(ctx, src, "rke2", "1.2.4")
	require.NoError(t, err)
	assert.Equal(t, "1.2.4", c.Version)

	c, err = loadVersion(ctx, src, "rke2", "1.2.3-rke2r1")
	require.NoError(t, err, "system-upgrade-controller spells + as -")
	assert.Equal(t, "1.2.3+rke2r1", c.Version, "the chart's own spelling")

	c, err = loadVersion(ctx, src, "rke2", "v2.0.0-build")
	require.NoError(t, err, "a v prefix on either side")
	assert.Equal(t, "v2.0.0+build", c.Version)

	_, err = loadVersion(ctx, src, "rke2", "9.9.9")
	require.ErrorContains(t, err, "chart rke2 version 9.9.9 not found", "the error of the version asked for")

	src.versionsErr = errors.New("index unreadable")
	_, err = loadVersion(ctx, src, "rke2", "1.2.3-rke2r1")
	require.ErrorContains(t, err, "chart rke2 version 1.2.3-rke2r1 not found", "no listing: the error of the load")
}

func TestEventHelpers(t *testing.T) {
	assert.Equal(t, "", title(""))
	assert.Equal(t, "Preflight", title("preflight"))
	assert.Equal(t, "short", truncate("short", 10))
	assert.Equal(t, "abc…", truncate("abcdef", 3))
}
