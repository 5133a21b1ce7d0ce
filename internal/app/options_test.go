package app

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
)

func TestOptionsDefaultsFillWhatIsUnset(t *testing.T) {
	var o Options
	o.defaults()
	assert.Equal(t, 30*time.Second, o.LeaseDuration)
	assert.Equal(t, 10*time.Second, o.Heartbeat)
	assert.Equal(t, host.DefaultHookTimeout, o.HookTimeout)
	assert.Equal(t, 5*time.Minute, o.HookTimeout)
	require.NotNil(t, o.Log)
	o.Log.Info("goes nowhere") // must not panic
	assert.Equal(t, io.Discard, o.Out)

	// negative durations are unset too
	o = Options{LeaseDuration: -time.Second, Heartbeat: -time.Second, HookTimeout: -time.Second}
	o.defaults()
	assert.Equal(t, 30*time.Second, o.LeaseDuration)
	assert.Equal(t, 10*time.Second, o.Heartbeat)
	assert.Equal(t, host.DefaultHookTimeout, o.HookTimeout)
}

func TestOptionsDefaultsKeepWhatIsSet(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.DiscardHandler)
	o := Options{LeaseDuration: time.Minute, Heartbeat: 2 * time.Second, HookTimeout: 7 * time.Second, Log: log, Out: &out}
	o.defaults()
	assert.Equal(t, time.Minute, o.LeaseDuration)
	assert.Equal(t, 2*time.Second, o.Heartbeat)
	assert.Equal(t, 7*time.Second, o.HookTimeout)
	assert.Same(t, log, o.Log, "no SUC: the log is the caller's")
	assert.Same(t, &out, o.Out)
}

func TestOptionsDefaultsNameTheSUCJobInEveryLogLine(t *testing.T) {
	var buf bytes.Buffer
	o := Options{Log: slog.New(slog.NewJSONHandler(&buf, nil)),
		SUC: host.SUC{Plan: "chart-upgrade", PlanHash: "0123456789abcdef", Pod: "apply-chart-upgrade-xyz"}}
	o.defaults()
	o.Log.Info("step")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	delete(rec, "time")
	assert.Equal(t, map[string]any{"level": "INFO", "msg": "step",
		"plan": "chart-upgrade", "plan_hash": "0123456789abcdef", "pod": "apply-chart-upgrade-xyz"}, rec,
		"the fields set, and only those")
}

func TestLogAndOut(t *testing.T) {
	log, out := logAndOut(nil, nil)
	require.NotNil(t, log)
	assert.Equal(t, io.Discard, out)

	l := slog.New(slog.DiscardHandler)
	var w bytes.Buffer
	log, out = logAndOut(l, &w)
	assert.Same(t, l, log)
	assert.Same(t, &w, out)
}

func TestOptionsLocalCarriesTheNodeRecords(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.DiscardHandler)
	o := Options{Kubeconfig: "/k", HostRoot: "/host", StateDir: "/state", LockFile: "/lock", TerminationLog: "/term",
		Log: log, Out: &out, NodeName: "n1", Target: "release/apps/web"}
	assert.Equal(t, Local{Kubeconfig: "/k", HostRoot: "/host", StateDir: "/state", LockFile: "/lock", TerminationLog: "/term",
		Log: log, Out: &out}, o.local())
}

func TestLeaseAnnotationsNameTheJob(t *testing.T) {
	assert.Equal(t, map[string]string{
		"chart-upgrader.io/node":      "node-1",
		"chart-upgrader.io/plan":      "chart-upgrade",
		"chart-upgrader.io/plan-hash": "abc",
		"chart-upgrader.io/pod":       "apply-xyz",
		"chart-upgrader.io/pod-uid":   "uid-1",
	}, leaseAnnotations("node-1", host.SUC{Plan: "chart-upgrade", PlanHash: "abc", Pod: "apply-xyz", PodUID: "uid-1"}))

	// only what is known: no empty annotation
	assert.Equal(t, map[string]string{"chart-upgrader.io/node": "node-1"}, leaseAnnotations("node-1", host.SUC{}))
	assert.Equal(t, map[string]string{"chart-upgrader.io/pod": "p"}, leaseAnnotations("", host.SUC{Pod: "p"}))
	assert.Empty(t, leaseAnnotations("", host.SUC{}))
}
