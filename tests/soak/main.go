// Command soak runs chart-upgrader's upgrade and rollback over and over
// against a local control plane and the Fleet simulator, with random
// faults, and checks invariants after every cycle. `make soak` runs it
// (scripts/soak); docs/reliability.md describes the faults and the
// invariants.
//
// Each cycle is one operation — an upgrade of demo-app 1.0.0 → 2.0.0, or a
// rollback to 1.0.0 — run by the real binary as separate processes on one
// to three simulated nodes (own journal, lock file and node name each),
// with faults drawn at random: a process killed (the crash switch after a
// random phase, or SIGKILL at a random moment) and re-run to completion,
// on the same node or another; a readiness delay of the simulated Fleet
// agent; an ErrApplied episode (before an upgrade, so preflight refuses
// with exit 3 and the upgrade is re-run once it is cleared, or during the
// wait); a kube-apiserver restart during the wait; a concurrent writer
// changing an unrelated value before the apply; a target left paused by an
// earlier run. Every wait has a deadline, and -duration bounds the whole
// run, setup and teardown included.
//
// The seed is printed: -seed replays the same draws (the operation of each
// cycle and its faults; timings differ from run to run).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// teardownReserve is kept from -duration for stopping everything.
const teardownReserve = 20 * time.Second

// minCycle: no cycle starts with less time than this left.
const minCycle = 25 * time.Second

type soak struct {
	seed      int64
	kind      string // managedchart or release (-kind)
	bin       string
	dir       string
	hooksDir  string
	w         *world
	nodes     []node
	installer map[string]any
	verbose   bool
	out       io.Writer

	backupDigest  map[string]string
	lastRestart   int       // the cycle
	lastRestartAt time.Time // when its faults were over

	cycles, runs, cutShort, rerunsOther int
	ops, faults, exits, violations      map[string]int
	cycleTime                           time.Duration
	simCatchUp                          []time.Duration
}

func main() {
	duration := flag.Duration("duration", 8*time.Minute, "the whole run, setup and teardown included")
	seed := flag.Int64("seed", 0, "random seed (default: from the clock); the same seed draws the same faults")
	nodes := flag.Int("nodes", 3, "simulated nodes, 1 to 3")
	bin := flag.String("bin", "", "the chart-upgrader binary (default: built into a temporary directory)")
	keep := flag.Bool("keep", false, "keep the work directory (every process's log, the journals) even without violations")
	verbose := flag.Bool("v", false, "print the output of every process run")
	kind := flag.String("kind", "managedchart", "what is soaked: managedchart (fleetsim), or release (a plain Helm release whose upgrades are SIGKILLed while Helm waits for the chart's hook)")
	since := flag.Int64("since", 0, "count -duration from this Unix time (scripts/soak passes its start, so the builds count too)")
	flag.Parse()
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000_000
	}
	if *kind != "managedchart" && *kind != "release" {
		fmt.Fprintf(os.Stderr, "soak: -kind %q: want managedchart or release\n", *kind)
		os.Exit(2)
	}
	if *nodes < 1 || *nodes > 3 {
		fmt.Fprintln(os.Stderr, "soak: -nodes must be 1, 2 or 3")
		os.Exit(2)
	}
	start := time.Now()
	if *since > 0 && time.Unix(*since, 0).Before(start) {
		start = time.Unix(*since, 0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithDeadline(ctx, start.Add(*duration))
	s := &soak{seed: *seed, bin: *bin, verbose: *verbose, out: os.Stdout, backupDigest: map[string]string{}, kind: *kind,
		ops: map[string]int{}, faults: map[string]int{}, exits: map[string]int{}, violations: map[string]int{}}
	err := s.run(ctx, start, *duration, *nodes, *keep)
	cancel()
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v (seed %d)\n", err, s.seed)
		os.Exit(1)
	}
	if s.total() > 0 || (s.cycles == 0 && s.kind != "release") {
		os.Exit(1)
	}
}

func (s *soak) total() int {
	t := 0
	for _, n := range s.violations {
		t += n
	}
	return t
}

func (s *soak) run(ctx context.Context, start time.Time, duration time.Duration, nodes int, keep bool) (err error) {
	fmt.Fprintf(s.out, "soak: seed %d, duration %s, %d nodes (replay the same faults: scripts/soak -seed %d)\n",
		s.seed, duration, nodes, s.seed)
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "chart-upgrader-soak-"); err != nil {
		return err
	}
	defer func() {
		if keep || s.total() > 0 || err != nil {
			fmt.Fprintf(s.out, "soak: logs of every run and the journals kept in %s\n", s.dir)
			return
		}
		_ = os.RemoveAll(s.dir)
	}()
	if s.bin == "" {
		s.bin = filepath.Join(s.dir, "chart-upgrader")
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", "testseams", "-o", s.bin, "./cmd/chart-upgrader")
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	s.hooksDir = filepath.Join(s.dir, "hooks")
	if err := installHooks(s.hooksDir); err != nil {
		return err
	}
	for i := range nodes {
		s.nodes = append(s.nodes, newNode(s.dir, fmt.Sprintf("node-%d", i+1)))
	}

	if s.kind == "release" {
		if err := s.runRelease(ctx, root, start.Add(duration-teardownReserve)); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "soak: %s\n", time.Since(start).Round(time.Second))
		return nil
	}
	fmt.Fprintln(s.out, "soak: starting kube-apiserver + etcd and the Fleet simulator; installing demo-app 1.0.0")
	setup := time.Now()
	if s.w, err = startWorld(ctx, root); err != nil {
		return err
	}
	defer s.w.stop()
	if s.installer, err = s.w.installerValues(); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "soak: ready in %s; cycles until %s\n", time.Since(setup).Round(time.Millisecond),
		start.Add(duration-teardownReserve).Format("15:04:05"))

	end := start.Add(duration - teardownReserve)
	loop := time.Now()
	s.loop(ctx, end)
	s.cycleTime = time.Since(loop)
	s.w.stop()
	s.summary(time.Since(start))
	return nil
}

func (s *soak) loop(ctx context.Context, end time.Time) {
	for n := 1; ; n++ {
		remaining := time.Until(end)
		if ctx.Err() != nil || remaining < minCycle {
			return
		}
		gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		mc, err := s.w.get(gctx)
		cancel()
		if err != nil {
			s.violations["cycle-incomplete"]++
			fmt.Fprintf(s.out, "cycle %3d: reading the target: %v\n", n, err)
			return
		}
		op := opUpgrade
		if mc.Version == v2 {
			op = opRollback
		}
		restartOK := n-s.lastRestart >= restartEvery && time.Since(s.lastRestartAt) >= restartGap && remaining > restartCycleCap+20*time.Second
		p := newPlan(s.seed, n, op, len(s.nodes), restartOK)
		budget := cycleCap
		if p.restart {
			s.lastRestart, budget = n, restartCycleCap
		}
		c := s.runCycle(ctx, n, p, min(budget, remaining))
		if len(c.restarts) > 0 {
			s.lastRestartAt = time.Now()
		}
		s.checkExits(c)
		if c.incomplete != "" && !c.cutShort && ctx.Err() == nil {
			c.violate("cycle-incomplete", c.incomplete)
		}
		s.record(c)
		if c.cutShort || ctx.Err() != nil {
			return
		}
	}
}

// record adds the cycle to the totals and prints its line, and the
// details of every violation.
func (s *soak) record(c *cycle) {
	s.cycles++
	s.ops[c.plan.op]++
	s.rerunsOther += c.rerunsOther
	if c.cutShort {
		s.cutShort++
	}
	var exits []string
	for _, pr := range c.runs {
		s.runs++
		s.exits[pr.exit()]++
		exits = append(exits, pr.exit())
	}
	for _, f := range c.faults {
		s.faults[f]++
	}
	s.simCatchUp = append(s.simCatchUp, c.simCatchUp...)
	status := "ok"
	switch {
	case len(c.violations) > 0:
		status = fmt.Sprintf("%d VIOLATION(S)", len(c.violations))
	case c.cutShort:
		status = "cut short by the deadline"
	}
	fmt.Fprintf(s.out, "cycle %3d %-8s %s→%s %6.1fs  runs [%s]  %s: %s\n", c.n, c.plan.op, c.plan.from, c.plan.to,
		c.dur.Seconds(), strings.Join(exits, " "), c.plan, status)
	for _, d := range c.simCatchUp {
		fmt.Fprintf(s.out, "          the simulator saw ManagedChart changes again %s after kube-apiserver served again\n", d.Round(100*time.Millisecond))
	}
	if c.writerNote != "" && s.verbose {
		fmt.Fprintf(s.out, "          note: %s\n", c.writerNote)
	}
	if s.verbose {
		for _, pr := range c.runs {
			fmt.Fprintf(s.out, "  -- %s: exit %s\n%s\n", pr.label, pr.exit(), pr.tail(40))
		}
	}
	for _, v := range c.violations {
		s.violations[v.kind]++
		fmt.Fprintf(s.out, "  VIOLATION %s in cycle %d (seed %d; %s %s→%s; faults %s):\n    %s\n",
			v.kind, c.n, s.seed, c.plan.op, c.plan.from, c.plan.to, c.plan, strings.ReplaceAll(v.detail, "\n", "\n    "))
	}
	if len(c.violations) > 0 {
		s.dumpState(c)
	}
}

// dumpState prints the target, the journals and the runs of a cycle with
// violations.
func (s *soak) dumpState(c *cycle) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	fmt.Fprintf(s.out, "  state after cycle %d:\n", c.n)
	if mc, err := s.w.get(ctx); err == nil {
		fmt.Fprintf(s.out, "    managedchart: version %s, paused %v, generation %d (was %d), values sha256 %s\n",
			mc.Version, mc.Paused, mc.Generation, c.before.Generation, mc.ValuesHash())
		keys := make([]string, 0, len(mc.Annotations))
		for k := range mc.Annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(s.out, "    annotation %s=%s\n", k, mc.Annotations[k])
		}
	}
	if bks, err := s.w.backups(ctx); err == nil {
		for _, b := range bks {
			fmt.Fprintf(s.out, "    backup %s (created %s)\n", b.Name, b.CreationTimestamp.Format(time.RFC3339))
		}
	}
	for _, nd := range s.nodes {
		st, err := host.Open(nd.stateDir)
		if err != nil {
			continue
		}
		entries, _ := st.List(targetRef)
		for _, e := range entries {
			fmt.Fprintf(s.out, "    journal %s: %s→%s valuesSha256=%s completed=%v updated %s\n", nd.name,
				e.FromVersion, e.ToVersion, e.ValuesHash, e.Completed, e.UpdatedAt.Format("15:04:05.000"))
		}
	}
	if !s.verbose {
		for _, pr := range c.runs {
			fmt.Fprintf(s.out, "  -- %s: exit %s (log %s)\n%s\n", pr.label, pr.exit(), pr.logPath, pr.tail(25))
		}
	}
}

// summary prints the totals as a table.
func (s *soak) summary(total time.Duration) {
	w := s.out
	fmt.Fprintf(w, "\n== soak summary (seed %d)\n", s.seed)
	row := func(k string, v any) { fmt.Fprintf(w, "  %-62s %v\n", k, v) }
	row("cycles run", s.cycles)
	for _, op := range []string{opUpgrade, opRollback} {
		row("  "+op+"s", s.ops[op])
	}
	row("  cut short by the deadline", s.cutShort)
	row("process runs", s.runs)
	row("  killed processes re-run on another node", s.rerunsOther)
	fmt.Fprintln(w, "faults injected, by kind")
	for _, k := range sortedKeys(s.faults) {
		row("  "+k, s.faults[k])
	}
	fmt.Fprintln(w, "exits, by code")
	for _, k := range sortedKeys(s.exits) {
		row("  "+k, s.exits[k])
	}
	fmt.Fprintf(w, "invariant violations, by kind (must be 0)\n")
	for _, k := range violationKinds {
		row("  "+k.kind+": "+k.what, s.violations[k.kind])
	}
	row("invariant violations, total", s.total())
	row("kube-apiserver restarts", s.w.restarts)
	if len(s.simCatchUp) > 0 {
		slowest := slices.Max(s.simCatchUp)
		row("  the simulator's watch back after a restart, slowest", slowest.Round(100*time.Millisecond))
	}
	row("duration (cycles)", s.cycleTime.Round(time.Second))
	row("duration (total, setup and teardown included)", total.Round(time.Second))
	switch {
	case s.total() > 0:
		fmt.Fprintf(w, "FAIL: %d invariant violation(s); replay the same draws with scripts/soak -seed %d\n", s.total(), s.seed)
	case s.cycles == 0:
		fmt.Fprintln(w, "FAIL: no cycle ran (the builds and setup took the whole -duration?): nothing was checked")
	default:
		fmt.Fprintln(w, "PASS: no invariant violated")
	}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
