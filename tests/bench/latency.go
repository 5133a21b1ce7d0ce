package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

type latencyFlags struct {
	chartUpgrader, out string
	stateDir           string
	runs               int
	delay              time.Duration
}

func latencyCommand(ctx context.Context, args []string, out, log io.Writer) error {
	var f latencyFlags
	fs := flag.NewFlagSet("bench latency", flag.ContinueOnError)
	fs.SetOutput(log)
	fs.StringVar(&f.chartUpgrader, "chart-upgrader", "bin/chart-upgrader", "the chart-upgrader binary")
	fs.IntVar(&f.runs, "runs", 100, "upgrades")
	fs.DurationVar(&f.delay, "delay", time.Second, "the simulator's readiness delay after each Helm upgrade (keeps the wait phase active)")
	fs.StringVar(&f.stateDir, "state-dir", "", "put chart-upgrader's journal, lock and termination log in a new directory under this one (default: the scratch directory, under $TMPDIR)")
	fs.StringVar(&f.out, "out", "", "also write the table to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.runs < 1 || f.delay <= 0 {
		return fmt.Errorf("--runs must be at least 1 and --delay positive")
	}
	rep, err := benchLatency(ctx, f, log)
	if err != nil {
		return err
	}
	return rep.emit(out, f.out)
}

// latencySample is one upgrade's ready detection.
type latencySample struct {
	exit   time.Duration // the simulator's final ready status write → the process was reaped
	detect time.Duration // → the wait phase saw it (the log's "phase done": millisecond precision)
}

func benchLatency(ctx context.Context, f latencyFlags, log io.Writer) (*report, error) {
	logf(log, "starting the control plane and the Fleet simulator")
	w, err := startWorld(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	if f.stateDir != "" {
		if w.local, err = os.MkdirTemp(f.stateDir, "chart-upgrader-bench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(w.local)
	}
	rel := release{name: "demo-app", releaseNS: "demo-system"}
	if err := w.deploy(ctx, rel, 2*time.Minute); err != nil {
		return nil, err
	}
	w.sim.SetFault(namespace, rel.name, fleetsim.Fault{Delay: f.delay})
	var samples []latencySample
	var walls []time.Duration
	skipped := 0
	for i := range f.runs {
		to, down := "2.0.0", i%2 == 1
		if down {
			to = "1.0.0"
		}
		p, err := runProc(ctx, nil, f.chartUpgrader, w.upgradeArgs(rel, to, down, 2*time.Minute)...)
		if err != nil {
			return nil, err
		}
		if err := p.ok("chart-upgrader → " + to); err != nil {
			return nil, err
		}
		ready := w.sim.LastStatusWrite(namespace, rel.name)
		tl := parseToolLog(p.Output)
		waitStart, seen := first(tl.WaitStart), first(tl.Ready)
		// count only runs that were waiting when the ready write went out
		if waitStart.IsZero() || !ready.After(waitStart) || ready.Before(p.Start) || ready.After(p.End) {
			skipped++
			logf(log, "%3d/%d → %s: not waiting when the simulator wrote ready; not counted", i+1, f.runs, to)
			continue
		}
		s := latencySample{exit: p.End.Sub(ready), detect: max(seen.Sub(ready), 0)}
		samples = append(samples, s)
		walls = append(walls, p.Wall)
		logf(log, "%3d/%d → %s  wall %s, ready write → exit %s", i+1, f.runs, to, secs(p.Wall), millis(s.exit))
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("no run was waiting when the simulator wrote ready")
	}
	var exits, detects, rest []time.Duration
	for _, s := range samples {
		exits = append(exits, s.exit)
		detects = append(detects, s.detect)
		rest = append(rest, s.exit-s.detect)
	}
	r := &report{}
	r.line("### Ready detection")
	r.line("")
	r.line("`make bench-latency` (`scripts/bench-latency`, RUNS=%d): from the simulator's final ready status write "+
		"(`sim.LastStatusWrite`, noted just before the request goes out) to the exit of the chart-upgrader process, "+
		"over %d upgrades alternating 1.0.0 ⇄ 2.0.0 with a %s readiness delay, so the wait phase is always "+
		"watching when the write happens (%d runs counted, %d not).", f.runs, f.runs, f.delay, len(samples), skipped)
	r.line("")
	r.machine()
	r.line("")
	row := func(name string, xs []time.Duration) []string {
		return []string{name, millis(median(xs)), millis(percentile(xs, 90)), millis(percentile(xs, 99)), millis(maxOf(xs))}
	}
	r.table([]string{"ready write →", "p50", "p90", "p99", "max"}, [][]string{
		row("**tool exit**", exits),
		row("wait phase sees it (log, ms precision)", detects),
		row("then verify + exit", rest),
	})
	r.line("")
	r.line("Wall time per upgrade: median %s. For comparison, a loop of `kubectl get` + `sleep 5` notices readiness "+
		"on average 2.5 s (half its interval) after the write, plus a kubectl and yq start.", secs(median(walls)))
	return r, nil
}

// first returns the single (or any) value of a per-target map.
func first(m map[string]time.Time) time.Time {
	for _, t := range m {
		return t
	}
	return time.Time{}
}
