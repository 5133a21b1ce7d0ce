package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// crashAfterEnv is the runner's test-only fault switch: the process
// SIGKILLs itself right after the named phase finished and was journaled.
const crashAfterEnv = "CHART_UPGRADER_TEST_CRASH_AFTER"

// The phases of each operation, for the crash switch.
var (
	upgradePhases  = []string{"resolve", "preflight", "merge", "apply", "wait", "verify"}
	rollbackPhases = []string{"restore", "apply", "wait", "verify"}
)

const (
	opUpgrade  = "upgrade"
	opRollback = "rollback"
)

// At most one kube-apiserver restart in restartEvery cycles and in
// restartGap. A restart costs about ten seconds, plus the time the
// simulator's watches take to come back: client-go re-watches with a
// backoff that grows up to a minute and shrinks again only after two
// minutes without failure, so restarts closer together make it slower.
const (
	restartEvery = 5
	restartGap   = 150 * time.Second
)

// plan is what one cycle does: the operation and the faults, all drawn
// from the cycle's own random source (seeded by the soak's seed and the
// cycle number), so the same seed draws the same faults for the same cycle.
type plan struct {
	op       string
	from, to string
	nodes    []int // indices of the nodes started at once

	crashAfter string        // the crash switch for one of them
	sigkill    bool          // or SIGKILL it at killDelay after the start
	killDelay  time.Duration //
	killWho    int           // index into nodes
	rerunOther bool          // re-run a killed process on another node

	delay      time.Duration // the simulator's readiness delay
	errApplied string        // "", "before" (preflight refuses, then cleared), "during" (while waiting)
	errClear   time.Duration // how long an ErrApplied episode during the wait lasts
	restart    bool          // restart kube-apiserver during the wait
	down       time.Duration // how long it stays down
	writer     string        // the concurrent writer's hook phase, or ""
	paused     bool          // the target starts paused, marked as paused by chart-upgrader
	idempotent bool          // a last run must find nothing to do and write nothing

	rng *rand.Rand // for the choices made while the cycle runs
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// newPlan draws cycle n's plan. Every draw is made whatever the outcome,
// so a cycle's draws do not depend on the state. restartOK says whether a
// kube-apiserver restart may be drawn now.
func newPlan(seed int64, n int, op string, nodes int, restartOK bool) plan {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(n)))
	p := plan{op: op, from: v1, to: v2, rng: r}
	if op == opRollback {
		p.from, p.to = v2, v1
	}
	// the draws, in a fixed order
	nNodes, order := r.IntN(10), r.Perm(nodes)
	killRoll, killKind, killPhase, killDelay, killWho, rerunOther := r.IntN(100), r.IntN(2), r.IntN(100), r.IntN(4000), r.IntN(3), r.IntN(2)
	delayRoll, delay := r.IntN(100), r.IntN(3000)
	errRoll, errKind, errClear := r.IntN(100), r.IntN(2), r.IntN(2000)
	restartRoll, down := r.IntN(100), r.IntN(1500)
	writerRoll, writerAt := r.IntN(100), r.IntN(len(writerPhases))
	pausedRoll, idemRoll := r.IntN(100), r.IntN(100)

	k := 1
	switch {
	case nNodes < 2:
		k = 3
	case nNodes < 4:
		k = 2
	}
	p.nodes = order[:min(k, nodes)]
	if killRoll < 40 {
		p.killWho = killWho % len(p.nodes)
		p.rerunOther = rerunOther == 0 && nodes > 1
		if killKind == 0 {
			phases := upgradePhases
			if op == opRollback {
				phases = rollbackPhases
			}
			p.crashAfter = phases[killPhase%len(phases)]
		} else {
			p.sigkill, p.killDelay = true, ms(killDelay)
		}
	}
	if delayRoll < 50 {
		p.delay = ms(delay)
	}
	if errRoll < 20 {
		p.errApplied, p.errClear = "during", time.Second+ms(errClear)
		if op == opUpgrade && errKind == 0 {
			p.errApplied = "before"
		}
	}
	if restartOK && restartRoll < 40 {
		p.restart, p.down = true, time.Second+ms(down)
	}
	if op == opUpgrade && writerRoll < 40 {
		p.writer = writerPhases[writerAt]
	}
	if op == opUpgrade && p.writer == "" && pausedRoll < 10 {
		p.paused = true
	}
	p.idempotent = idemRoll < 25
	// the faults that act during the wait need a wait to act in
	if p.errApplied == "during" {
		p.delay = max(p.delay, 2*time.Second)
	}
	if p.restart {
		p.delay = max(p.delay, 5*time.Second)
	}
	return p
}

// String is the plan in one line.
func (p plan) String() string {
	var parts []string
	names := make([]string, len(p.nodes))
	for i, n := range p.nodes {
		names[i] = fmt.Sprintf("node-%d", n+1)
	}
	parts = append(parts, strings.Join(names, "+"))
	switch {
	case p.crashAfter != "":
		parts = append(parts, fmt.Sprintf("crash node-%d after %s", p.nodes[p.killWho]+1, p.crashAfter))
	case p.sigkill:
		parts = append(parts, fmt.Sprintf("SIGKILL node-%d at %s", p.nodes[p.killWho]+1, p.killDelay))
	}
	if (p.crashAfter != "" || p.sigkill) && p.rerunOther {
		parts = append(parts, "re-run elsewhere")
	}
	if p.delay > 0 {
		parts = append(parts, "delay "+p.delay.String())
	}
	if p.errApplied != "" {
		parts = append(parts, "ErrApplied "+p.errApplied)
	}
	if p.restart {
		parts = append(parts, "apiserver restart")
	}
	if p.writer != "" {
		parts = append(parts, "writer@pre-"+p.writer)
	}
	if p.paused {
		parts = append(parts, "paused")
	}
	if p.idempotent {
		parts = append(parts, "re-run no-op")
	}
	return strings.Join(parts, ", ")
}
