package upgrade

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// fakeGates serves one gate's objects from memory: the operator's status
// is set by the test.
type fakeGates struct {
	mu       sync.Mutex
	phase    string // status.phase of the one object; "" none
	version  string // status.version
	ch       chan struct{}
	checkErr error
	checked  []Change
	reads    int
}

func newFakeGates(phase, version string) *fakeGates {
	return &fakeGates{phase: phase, version: version, ch: make(chan struct{}, 1)}
}

func (g *fakeGates) set(phase, version string) {
	g.mu.Lock()
	g.phase, g.version = phase, version
	g.mu.Unlock()
	select {
	case g.ch <- struct{}{}:
	default:
	}
}

func (g *fakeGates) seen() []health.Seen {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.phase == "" {
		return []health.Seen{{}}
	}
	o := map[string]any{"metadata": map[string]any{"name": "w", "namespace": "ns", "generation": int64(1)},
		"status": map[string]any{"phase": g.phase, "version": g.version}}
	return []health.Seen{{Objects: []map[string]any{o}}}
}

func (g *fakeGates) Check(_ context.Context, _ *Observed, c Change) error {
	g.checked = append(g.checked, c)
	return g.checkErr
}

func (g *fakeGates) Read(context.Context, *Observed, Want) ([]health.Seen, error) {
	g.mu.Lock()
	g.reads++
	g.mu.Unlock()
	return g.seen(), nil
}

func (g *fakeGates) Watch(context.Context, *Observed) (GateWatch, error) { return g, nil }

func (g *fakeGates) Seen(*Observed, Want) []health.Seen { return g.seen() }
func (g *fakeGates) Changed() <-chan struct{}           { return g.ch }

// withGate gives e's job one gate on its operator's Widget, read from g.
func (e *env) withGate(g *fakeGates) {
	e.t.Helper()
	cur, err := health.Compile("status.phase == 'Deployed' && status.version == version")
	require.NoError(e.t, err)
	failed, err := health.Compile("status.phase == 'Failed'")
	require.NoError(e.t, err)
	sel, err := health.ParseSelector("app=widget")
	require.NoError(e.t, err)
	e.job.Health = []health.Gate{{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Selector: sel, MinCount: 1, Current: cur, Failed: failed}}
	e.job.Gates = g
}

// The upgrade is done only once the gate is current: the wait goes on
// after the target is ready, and ends on the operator's write.
func TestRunWaitsForTheGates(t *testing.T) {
	e := newEnv(t)
	g := newFakeGates("Deployed", "1.0.0") // the operator's status from before
	e.withGate(g)
	waiting := make(chan struct{})
	var once sync.Once
	e.runner.Heartbeat = 5 * time.Millisecond
	done := make(chan error, 1)
	go func() { _, err := e.run(GoalUpgrade); done <- err }()
	go func() {
		for len(e.log.lines("msg=waiting", "gate Widget example.com/v1 in ns (app=widget): in progress")) == 0 {
			time.Sleep(time.Millisecond)
		}
		once.Do(func() { close(waiting) })
	}()
	ctx := e.ctx()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the run ended before the gate was current: %v", err)
	case <-ctx.Done():
		t.Fatal("no progress line names the gate")
	}
	g.set("Deployed", "2.0.0")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the wait did not see the operator's write")
	}
	require.Len(t, g.checked, 1, "preflight checked the gates")
	assert.Equal(t, "2.0.0", g.checked[0].Version)
	entry, ok := e.journal.entry("fake/ns/app", "2.0.0")
	require.True(t, ok)
	require.Len(t, entry.Gates, 1)
	assert.Equal(t, health.Current, entry.Gates[0].State)

	// a re-run finds the gate current: nothing to do
	r := e.again()
	res := r.mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.Len(t, e.target.writes, 1)
}

// A failed gate ends the wait at once, exit 1, naming the object, the
// expression and what it read.
func TestRunAFailedGateEndsTheWait(t *testing.T) {
	e := newEnv(t)
	g := newFakeGates("Failed", "2.0.0")
	e.withGate(g)
	_, err := e.run(GoalUpgrade)
	require.Error(t, err)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err))
	assert.ErrorContains(t, err, `fake/ns/app is ready at version 2.0.0, but a health gate failed: gate Widget example.com/v1 in ns (app=widget): failed, 0/1 current: Widget ns/w: failed: status.phase == 'Failed' (status.phase = "Failed")`)
	entry, _ := e.journal.entry("fake/ns/app", "2.0.0")
	require.Len(t, entry.Gates, 1, "the journal keeps the gates of a failed wait, for status")
	assert.Equal(t, health.Failed, entry.Gates[0].State)
}

// The timeout names each gate still open and why; a re-run resumes the
// wait without a second apply.
func TestRunGateTimeoutThenResume(t *testing.T) {
	e := newEnv(t)
	g := newFakeGates("", "")
	e.withGate(g)
	e.job.Timeout = 30 * time.Millisecond
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrTimeout)
	assert.ErrorContains(t, err, "gate Widget example.com/v1 in ns (app=widget): in progress, 0/0 current: 0 Widgets exist, at least 1 must")
	require.Len(t, e.target.writes, 1)

	// the re-run finds the gate still open, so it waits; the operator
	// then writes its status
	e.job.Timeout = testBound
	r := e.again()
	r.job = e.job
	r.runner.Heartbeat = 5 * time.Millisecond
	go func() {
		for len(r.log.lines("msg=waiting", "gate Widget")) == 0 {
			time.Sleep(time.Millisecond)
		}
		g.set("Deployed", "2.0.0")
	}()
	res := r.mustRun(GoalUpgrade)
	assert.Equal(t, SituationDone, res.Situation)
	assert.Len(t, e.target.writes, 1, "no second apply")
	assert.Equal(t, hookCalls(StepResolve, StepWait, StepVerify), r.hooks.callList())
}

// A gate the port refuses at preflight is bad input, before any write.
func TestRunGateRefusedAtPreflight(t *testing.T) {
	e := newEnv(t)
	g := newFakeGates("Deployed", "2.0.0")
	g.checkErr = outcome.BadInput(assert.AnError)
	e.withGate(g)
	_, err := e.run(GoalUpgrade)
	require.Error(t, err)
	assert.Equal(t, outcome.ExitBadInput, outcome.Code(err))
	assert.Empty(t, e.target.writes)
}

// Gates are judged only once the target itself is ready: a failure seen
// before (status from an older rollout) does not end the wait.
func TestRunGatesWaitForTheTarget(t *testing.T) {
	e := newEnv(t)
	g := newFakeGates("Failed", "1.0.0")
	e.withGate(g)
	e.target.notReady = true
	e.job.Timeout = 30 * time.Millisecond
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrTimeout, "not a gate failure")
	assert.NotContains(t, err.Error(), "gate")
}

// A gate's values are those the chart renders with: the new chart's
// defaults under the target's values under its controller's overlay.
func TestGateValuesAreTheRenderedValues(t *testing.T) {
	cur, err := health.Compile("values.image.tag == '2' && values.image.repository == 'mine' && values.replicas == 3")
	require.NoError(t, err)
	g := health.Gate{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", MinCount: 1, Current: cur}
	o := &Observed{Values: map[string]any{"image": map[string]any{"repository": "mine"}}, Overlay: map[string]any{"replicas": 3}}
	defaults := map[string]any{"image": map[string]any{"repository": "theirs", "tag": "2"}, "replicas": 1}
	seen := []health.Seen{{Objects: []map[string]any{{"metadata": map[string]any{"name": "c", "namespace": "ns"}}}}}
	v := judgeGates([]health.Gate{g}, seen, defaults, o, Want{Version: "2.0.0"})
	assert.Equal(t, health.Current, v[0].State, v[0].Why)
}

// A live rule's source this process may not read refuses the upgrade
// (exit 3) naming the rule and the RBAC rule that lets it, before any
// write.
func TestRunAForbiddenLiveSourceIsRefusedNamingTheRule(t *testing.T) {
	e := newEnv(t)
	p, err := values.ParsePattern("storage.class")
	require.NoError(t, err)
	expr, err := values.ParseExpr(".value")
	require.NoError(t, err)
	src := values.ObjectRef{APIVersion: "longhorn.io/v1beta2", Kind: "Setting", Namespace: "longhorn-system", Name: "node-drain-policy"}
	live, err := values.NewRule(p, values.PolicyLive, &src, expr)
	require.NoError(t, err)
	e.job.Rules = append(e.job.Rules, live)
	e.cluster.setErr("Live", &ForbiddenSource{Ref: src, Grant: "add to a Role in namespace longhorn-system the rule {...}", Err: assert.AnError})
	_, err = e.run(GoalUpgrade)
	require.Error(t, err)
	assert.Equal(t, outcome.ExitRefused, outcome.Code(err))
	assert.ErrorContains(t, err, "which rule 2 (storage.class, live) reads: this process may not read it: add to a Role in namespace longhorn-system the rule {...}")
	assert.Empty(t, e.target.writes)
}
