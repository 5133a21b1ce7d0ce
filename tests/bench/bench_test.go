package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestPercentileIsNearestRank(t *testing.T) {
	xs := []int{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	assert.Equal(t, 5, median(xs))
	assert.Equal(t, 9, percentile(xs, 90))
	assert.Equal(t, 10, percentile(xs, 99))
	assert.Equal(t, 10, maxOf(xs))
	assert.Equal(t, 1, percentile(xs, 1))
	assert.Equal(t, 0, median([]int(nil)))
	assert.Equal(t, []int{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}, xs, "the input is not reordered")
}

func TestAttributeCountsOneToolInItsWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	mc := func(name string) *testenv.AuditObjectRef {
		return &testenv.AuditObjectRef{Resource: "managedcharts", Namespace: "fleet-local", Name: name}
	}
	events := []testenv.AuditEvent{
		{UserAgent: "chart-upgrader", Verb: "get", ObjectRef: mc("a"), RequestReceivedTimestamp: at(1)},
		{UserAgent: "chart-upgrader", Verb: "update", ObjectRef: mc("a"), RequestReceivedTimestamp: at(2), StageTimestamp: at(3)},
		{UserAgent: "chart-upgrader", Verb: "update", ObjectRef: mc("b"), RequestReceivedTimestamp: at(4), StageTimestamp: at(5)},
		{UserAgent: "chart-upgrader", Verb: "update", ObjectRef: &testenv.AuditObjectRef{Resource: "managedcharts", Name: "a", Subresource: "status"},
			RequestReceivedTimestamp: at(6), StageTimestamp: at(6)},
		{UserAgent: "chart-upgrader", Verb: "get", RequestURI: "/apis?timeout=32s", RequestReceivedTimestamp: at(7)},
		{UserAgent: "fleetsim", Verb: "update", ObjectRef: mc("a"), RequestReceivedTimestamp: at(2)},
		{UserAgent: "kubectl/v1.33.13 (linux/amd64)", Verb: "patch", ObjectRef: mc("a"), RequestReceivedTimestamp: at(2)},
		{UserAgent: "chart-upgrader", Verb: "get", ObjectRef: mc("a"), RequestReceivedTimestamp: at(20)}, // another run
	}
	r := attribute(events, agentChartUpgrader, at(0), at(10))
	assert.Equal(t, 5, r.Total)
	assert.Equal(t, map[string]int{"get": 2, "update": 3}, r.ByVerb)
	assert.Equal(t, at(5), r.Applied, "the last write of a ManagedChart's spec, when answered")
	assert.Equal(t, map[string]time.Time{"a": at(3), "b": at(5)}, r.AppliedTo)
	assert.Equal(t, 1, r.ByKind["get /apis"])
	assert.Equal(t, "get 2, update 3", r.verbs())

	k := attribute(events, agentKubectl, at(0), at(10))
	assert.Equal(t, 1, k.Total)
}

func TestParseToolLog(t *testing.T) {
	out := []byte(`not json
{"time":"2026-11-22T13:43:25.506Z","level":"INFO","msg":"phase start","target":"managedchart/fleet-local/a","phase":"wait"}
{"time":"2026-11-22T13:43:29.192Z","level":"INFO","msg":"phase done","target":"managedchart/fleet-local/a","phase":"wait","duration":"3.686s"}
{"time":"2026-11-22T13:43:29.233Z","level":"INFO","msg":"phase done","target":"managedchart/fleet-local/a","phase":"verify","duration":"7ms"}
`)
	l := parseToolLog(out)
	assert.Equal(t, time.Date(2026, 11, 22, 13, 43, 25, 506e6, time.UTC), l.WaitStart["managedchart/fleet-local/a"])
	assert.Equal(t, time.Date(2026, 11, 22, 13, 43, 29, 192e6, time.UTC), first(l.Ready))
	assert.Equal(t, []time.Duration{3686 * time.Millisecond}, l.Phases["wait"])
	assert.Equal(t, []time.Duration{7 * time.Millisecond}, l.Phases["verify"])
}
