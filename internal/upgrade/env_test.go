package upgrade

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// testBound bounds every run of a test: a hang fails, it never blocks.
const testBound = 10 * time.Second

// vals parses an inline values document (`{a: {b: 1}}`).
func vals(t testing.TB, doc string) map[string]any {
	t.Helper()
	m, err := values.Parse([]byte(doc))
	require.NoError(t, err, "test values %q", doc)
	return m
}

func hashOf(t testing.TB, v map[string]any) string {
	t.Helper()
	h, err := values.Hash(v)
	require.NoError(t, err)
	return h
}

// rule builds a rule without a source: "follow", "image.tag".
func rule(t testing.TB, policy, pattern string) values.Rule {
	t.Helper()
	p, err := values.ParsePattern(pattern)
	require.NoError(t, err)
	pol, err := values.ParsePolicy(policy)
	require.NoError(t, err)
	r, err := values.NewRule(p, pol, nil, nil)
	require.NoError(t, err)
	return r
}

// The charts of the tests: app 1.0.0, 2.0.0 and 3.0.0. Each version moves
// image.tag; 2.0.0 adds feature.enabled.
func appChart(version string) *Chart {
	d := map[string]any{"replicas": int64(1), "image": map[string]any{"tag": version[:3]}, "cidr": "10.0.0.0/16"}
	if version >= "2.0.0" {
		d["feature"] = map[string]any{"enabled": false}
	}
	return &Chart{Name: "app", Version: version, Defaults: d}
}

// The target of the tests starts at 1.0.0 with a customised replica count
// and the old default image tag written out (a pin the follow rule drops).
const (
	startValues  = `{replicas: 3, image: {tag: "1.0"}}`
	mergedValues = `{replicas: 3}` // startValues merged for 2.0.0
)

// env is one process (a runner with its cluster, journal and hooks) on a
// fake target, a chart source and a cluster's Leases, which peers share.
type env struct {
	t       *testing.T
	target  *fakeTarget
	source  *fakeSource
	leases  *leaseStore
	cluster *fakeCluster
	journal *fakeJournal
	hooks   *fakeHooks
	out     *syncBuffer // the decision tables
	log     *syncBuffer
	runner  *Runner
	job     Job
}

// leaseKey is the key of the target's Lease in the store.
func (e *env) leaseKey() string { return e.target.ref.Namespace + "/" + e.job.Lease }

func newEnv(t *testing.T) *env {
	t.Helper()
	target := newFakeTarget("app", fakeObj{Chart: "app", Version: "1.0.0", Values: vals(t, startValues)})
	source := newFakeSource(appChart("1.0.0"), appChart("2.0.0"), appChart("3.0.0"))
	e := &env{t: t, target: target, source: source, leases: newLeaseStore()}
	e.job = Job{Target: target, Lease: "chart-upgrader-fake-app", Source: source, Rules: []values.Rule{rule(t, "follow", "image.tag")}, Timeout: testBound}
	e.setup("node-a")
	return e
}

// setup gives e its own process: cluster port, journal, hooks and runner.
func (e *env) setup(identity string) {
	e.cluster = newFakeCluster(identity, e.leases)
	e.cluster.duration = 200 * time.Millisecond
	e.journal = newFakeJournal()
	e.hooks = &fakeHooks{fail: map[string]error{}}
	e.out, e.log = &syncBuffer{}, &syncBuffer{}
	e.runner = &Runner{Cluster: e.cluster, Journal: e.journal, Hooks: e.hooks, Settings: Settings{
		Version:       "2.0.0",
		LeaseDuration: e.cluster.duration,
		Heartbeat:     time.Hour, // progress lines only when the judgement changes
		Node:          identity,
		Identity:      identity,
		JobName:       "plan/apply-" + identity,
		Names:         Names{Version: "--version", AllowDowngrade: "--allow-downgrade", Unpause: "--unpause"},
		Log:           slog.New(slog.NewTextHandler(e.log, nil)),
		Out:           e.out,
	}}
}

// peer is another process on the same target, charts and Leases.
func (e *env) peer(identity string) *env {
	p := &env{t: e.t, target: e.target, source: e.source, leases: e.leases, job: e.job}
	p.setup(identity)
	p.runner.Settings.Version = e.runner.Settings.Version
	return p
}

// again is a fresh process of the same identity with the same journal,
// as after a restart.
func (e *env) again() *env {
	p := e.peer(e.cluster.identity)
	p.journal = e.journal
	p.runner.Journal = e.journal
	return p
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) run(goal Goal) (*Result, error) {
	return e.runner.Run(e.ctx(), e.job, goal)
}

// mustRun runs to goal and fails the test on an error.
func (e *env) mustRun(goal Goal) *Result {
	e.t.Helper()
	res, err := e.run(goal)
	require.NoError(e.t, err)
	require.NotNil(e.t, res)
	return res
}
