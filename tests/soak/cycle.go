package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// Bounds of one cycle and of one process run. The wait timeout the tool
// gets covers the longest wait a cycle's faults make (delay 5 s, a
// restart, an ErrApplied episode of 3 s) with room to spare.
const (
	waitTimeout = 30 * time.Second
	procLimit   = 50 * time.Second
	cycleCap    = 100 * time.Second
	// a cycle with a kube-apiserver restart also waits for the simulator
	// to see changes again (probeTimeout)
	restartCycleCap = 200 * time.Second
	probeTimeout    = 120 * time.Second
	maxReruns       = 4
	leaseDur        = 6 * time.Second
)

const errAppliedMsg = "soak: injected ErrApplied (the agent cannot deploy)"

// cycle is one operation (an upgrade or a rollback) with its faults, as it
// ran.
type cycle struct {
	n     int
	plan  plan
	dir   string
	start time.Time
	dur   time.Duration

	before     *managedchart.ManagedChart
	helmBefore int

	mu         sync.Mutex
	runs       []*procRun
	faults     []string
	restarts   [][2]time.Time  // kube-apiserver down → serving again
	simCatchUp []time.Duration // from serving again until the simulator saw a new ManagedChart
	busy       bool            // a fault acting during the wait is under way

	slots       []*procRun // the last run of each node started at once
	writes      map[string]string
	specWrites  int64 // spec writes by the soak itself (writer, pause)
	errBefore   map[*procRun]bool
	cutShort    bool
	incomplete  string
	violations  []violation
	idempotent  *procRun
	writerNote  string
	writtenAt   time.Time // when the concurrent writer wrote
	rerunsOther int
}

func (c *cycle) fault(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, kind)
}

func (c *cycle) setBusy(b bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = b
}

func (c *cycle) isBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

func (c *cycle) addRun(p *procRun) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, p)
}

// anyRunning: some process of the cycle is running.
func (c *cycle) anyRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.runs {
		if p.running() {
			return true
		}
	}
	return false
}

// args are the command line of one run of the cycle's operation on n.
func (s *soak) args(op string, n node) []string {
	var a []string
	if op == opUpgrade {
		a = []string{"upgrade", "--skip-image-check", "--spec", filepath.Join(s.w.examples, "spec.yaml"), "--version", v2,
			"--hooks-dir", s.hooksDir, "--hook-timeout", "30s"}
	} else {
		a = []string{"rollback", "--target", targetRef}
	}
	return append(a, "--timeout", waitTimeout.String(), "--lease-duration", leaseDur.String(),
		"--kubeconfig", s.w.env.KubeconfigPath(), "--state-dir", n.stateDir, "--lock-file", n.lockFile,
		"--termination-log", n.termLog, "--node-name", n.name, "--log-format", "json")
}

func (s *soak) start(ctx context.Context, c *cycle, n node, label string, env []string) *procRun {
	c.mu.Lock()
	logPath := filepath.Join(c.dir, fmt.Sprintf("%02d-%s.log", len(c.runs)+1, strings.ReplaceAll(label, " ", "-")))
	c.mu.Unlock()
	p := startProc(ctx, s.bin, n, label, env, procLimit, logPath, s.args(c.plan.op, n)...)
	c.addRun(p)
	return p
}

// runCycle runs cycle n: the faults set before, the processes, the faults
// injected while they run, re-runs until every node's process succeeded,
// then the invariants.
func (s *soak) runCycle(ctx context.Context, n int, p plan, budget time.Duration) *cycle {
	c := &cycle{n: n, plan: p, start: time.Now(), writes: map[string]string{}, errBefore: map[*procRun]bool{},
		dir: filepath.Join(s.dir, "cycles", fmt.Sprintf("%03d-%s", n, p.op))}
	defer func() { c.dur = time.Since(c.start) }()
	_ = os.MkdirAll(c.dir, 0o755)
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	defer func() {
		if cctx.Err() != nil && ctx.Err() == nil && budget < cycleCap {
			c.cutShort = true // the soak's own deadline, not a hang
		}
	}()

	var err error
	if c.before, err = s.w.get(cctx); err != nil {
		c.incomplete = "reading the target before the cycle: " + err.Error()
		return c
	}
	c.helmBefore = s.w.sim.HelmRuns(namespace, name)

	// faults set before the cycle
	base := fleetsim.Fault{Delay: p.delay}
	s.w.sim.SetFault(namespace, name, base)
	defer s.w.sim.SetFault(namespace, name, fleetsim.Fault{})
	if p.delay > 0 {
		c.fault("sim: readiness delay")
	}
	if p.paused {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}},"spec":{"paused":true}}`, managedchart.AnnotationPaused)
		if err := retry(cctx, func(ctx context.Context) error { return s.w.patch(ctx, []byte(patch)) }); err != nil {
			c.incomplete = "pausing the target: " + err.Error()
			return c
		}
		c.specWrites++
		c.fault("paused by an earlier run (chart-upgrader.io/paused)")
	}
	errBefore := false
	if p.errApplied == "before" {
		f := base
		f.ErrApplied = errAppliedMsg
		s.w.sim.SetFault(namespace, name, f)
		if _, ok := s.w.awaitState(cctx, 15*time.Second, func(_ *managedchart.ManagedChart, b *managedchart.Bundle, _ []managedchart.BundleDeployment) bool {
			return b != nil && b.Status.ObservedGeneration == b.Generation && b.Status.Summary.ErrApplied > 0
		}); ok {
			errBefore = true
			c.fault("ErrApplied before an upgrade (refused, cleared, re-run)")
		} else {
			s.w.sim.SetFault(namespace, name, base)
			c.writerNote = "ErrApplied never showed in the Bundle status: not injected"
		}
	}
	var wr *writer
	var env []string
	if p.writer != "" {
		if wr, err = s.startWriter(cctx, c.dir, n, p.writer, p.to); err != nil {
			c.incomplete = "starting the writer: " + err.Error()
			return c
		}
		env = wr.env()
	}

	// the faults that act once the apply is seen: during the wait
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		s.duringWait(cctx, c, base, stopWatch)
	}()

	// the first wave: one process per node, started at once
	for i, ni := range p.nodes {
		e := env
		if p.crashAfter != "" && i == p.killWho {
			e = append(append([]string(nil), env...), crashAfterEnv+"="+p.crashAfter)
		}
		pr := s.start(cctx, c, s.nodes[ni], s.nodes[ni].name+" "+p.op, e)
		c.errBefore[pr] = errBefore
		c.slots = append(c.slots, pr)
	}
	if p.sigkill {
		victim := c.slots[p.killWho]
		go func() {
			select {
			case <-time.After(p.killDelay):
				victim.kill("soak")
			case <-victim.done:
			}
		}()
	}
	for _, pr := range c.slots {
		pr.wait()
	}
	for _, pr := range c.slots {
		if pr.killedByFault() {
			if pr.crashAt != "" {
				c.fault("kill: crash switch after " + pr.crashAt)
			} else {
				c.fault("kill: SIGKILL at a random moment")
			}
		}
	}

	// re-runs: every node's process is retried until it succeeds, as
	// system-upgrade-controller retries a failed Job
	for attempt := 1; ; attempt++ {
		var failed []int
		for i, pr := range c.slots {
			if pr.code != 0 {
				failed = append(failed, i)
			}
		}
		if len(failed) == 0 {
			break
		}
		if attempt > maxReruns || cctx.Err() != nil {
			c.incomplete = fmt.Sprintf("%d node(s) still failing after %d re-runs", len(failed), attempt-1)
			break
		}
		// SUC retries a failed Job with a backoff; a retry while
		// kube-apiserver is down would only fail again
		select {
		case <-time.After(time.Duration(attempt) * 250 * time.Millisecond):
		case <-cctx.Done():
		}
		for c.isBusy() && cctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		_, _ = s.w.get(cctx)
		if errBefore {
			// the episode ends: clear it, and re-run once Fleet reports
			// the target healthy again (a re-run before that is refused,
			// as it must be, whatever ended the first run)
			s.w.sim.SetFault(namespace, name, base)
			errBefore = false
			s.w.awaitState(cctx, 20*time.Second, healthy)
		}
		// a refusal is retried once Fleet reports the target healthy again,
		// as a person (or SUC's backoff) would
		for _, i := range failed {
			if c.slots[i].code == 3 {
				s.w.awaitState(cctx, 20*time.Second, healthy)
				break
			}
		}
		for _, i := range failed {
			last := c.slots[i]
			nd := last.node
			if last.killedByFault() && p.rerunOther {
				nd = s.otherNode(p, last.node)
				c.rerunsOther++
			}
			pr := s.start(cctx, c, nd, fmt.Sprintf("%s %s re-run %d", nd.name, p.op, attempt), env)
			c.errBefore[pr] = errBefore
			c.slots[i] = pr
			pr.wait()
		}
	}
	close(stopWatch)
	<-watchDone
	if wr != nil {
		written, why := wr.finish()
		if !written.IsZero() {
			c.writtenAt = written
			c.writes["soak.writer."+wr.key] = wr.val
			c.specWrites++
			c.fault("concurrent writer (before the apply)")
		} else {
			c.writerNote = "writer armed at pre-" + p.writer + " but did not write: " + why
		}
	}
	s.w.sim.SetFault(namespace, name, fleetsim.Fault{})
	if c.incomplete != "" || cctx.Err() != nil {
		if c.incomplete == "" {
			c.incomplete = "the cycle ran out of time: " + cctx.Err().Error()
		}
		return c
	}

	// the state now must be ready (the faults are cleared)
	if _, ok := s.w.awaitState(cctx, 20*time.Second, func(mc *managedchart.ManagedChart, b *managedchart.Bundle, bds []managedchart.BundleDeployment) bool {
		want, _ := mc.Observed().Applied.Want()
		return managedchart.Evaluate(want, mc, b, bds).Ready
	}); !ok && cctx.Err() == nil {
		c.violate("ready", "the target is not ready for what its annotations say within 20s after the cycle")
	}
	if p.idempotent && cctx.Err() == nil {
		s.idempotentRun(cctx, c)
	}
	s.check(cctx, c)
	return c
}

// duringWait injects the faults that need the apply to have happened: an
// ErrApplied episode and a kube-apiserver restart.
func (s *soak) duringWait(ctx context.Context, c *cycle, base fleetsim.Fault, stop <-chan struct{}) {
	p := c.plan
	if p.errApplied != "during" && !p.restart {
		return
	}
	for {
		mc, found, err := s.w.tc.Get(ctx, namespace, name)
		if err == nil && found && mc.Version == p.to && mc.Annotations[managedchart.AnnotationVersion] == p.to {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-time.After(25 * time.Millisecond):
		}
	}
	c.setBusy(true) // re-runs wait until these faults are over
	defer c.setBusy(false)
	when := func() string {
		if c.anyRunning() {
			return "during the wait"
		}
		return "after the run ended"
	}
	if p.errApplied == "during" {
		f := base
		f.ErrApplied = errAppliedMsg
		s.w.sim.SetFault(namespace, name, f)
		c.fault("ErrApplied episode " + when())
		select {
		case <-time.After(p.errClear):
		case <-ctx.Done():
		}
		s.w.sim.SetFault(namespace, name, base)
	}
	if p.restart && ctx.Err() == nil {
		what := "kube-apiserver restart " + when()
		t0 := time.Now()
		err := s.w.restartAPIServer(ctx, p.down)
		if err != nil {
			c.mu.Lock()
			c.restarts = append(c.restarts, [2]time.Time{t0, time.Now()})
			c.mu.Unlock()
			c.violate("cycle-incomplete", "restarting kube-apiserver: "+err.Error())
			return
		}
		c.fault(what)
		d, err := s.w.probeSim(ctx, probeTimeout)
		// the fault lasts until the simulator sees changes again: a run
		// that fails or times out meanwhile is explained by it
		c.mu.Lock()
		c.restarts = append(c.restarts, [2]time.Time{t0, time.Now()})
		c.simCatchUp = append(c.simCatchUp, d)
		c.mu.Unlock()
		if err != nil {
			c.violate("cycle-incomplete", "after the kube-apiserver restart: "+err.Error())
		}
	}
}

// otherNode picks the node a killed process is re-run on: another one.
func (s *soak) otherNode(p plan, cur node) node {
	for {
		nd := s.nodes[p.rng.IntN(len(s.nodes))]
		if nd.name != cur.name {
			return nd
		}
	}
}

// idempotentRun runs the operation once more on some node: it must exit 0
// and write nothing (the spec's generation and the annotations unchanged).
func (s *soak) idempotentRun(ctx context.Context, c *cycle) {
	before, err := s.w.get(ctx)
	if err != nil {
		return
	}
	nd := s.nodes[c.plan.rng.IntN(len(s.nodes))]
	pr := s.start(ctx, c, nd, nd.name+" "+c.plan.op+" again", nil)
	pr.wait()
	c.idempotent = pr
	after, err := s.w.get(ctx)
	if err != nil {
		return
	}
	switch {
	case pr.code != 0:
		// reported as an unexpected exit
	case after.Generation != before.Generation || !equalMaps(after.Annotations, before.Annotations) || pr.applied() > 0:
		c.violate("idempotent", fmt.Sprintf("a re-run after success wrote: generation %d → %d, annotations %v → %v",
			before.Generation, after.Generation, before.Annotations, after.Annotations))
	}
}

func equalMaps(a, b map[string]string) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
