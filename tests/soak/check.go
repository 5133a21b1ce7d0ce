package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// violation is one broken invariant.
type violation struct {
	kind, detail string
}

// The invariant kinds, in the order the summary lists them.
var violationKinds = []struct{ kind, what string }{
	{"record", "(1) spec.version and values hash = annotations"},
	{"journal", "(1) a journal entry with that version and hash"},
	{"backup", "(2) one backup Secret per from-version, written once"},
	{"values", "(3) no user value lost"},
	{"paused", "(4) never left paused"},
	{"applied-once", "(5) one apply per operation"},
	{"helm-runs", "(5) Helm runs ≤ spec writes"},
	{"ready", "ready after the cycle"},
	{"idempotent", "a re-run after success writes nothing"},
	{"unexpected-exit", "no exit a fault does not explain"},
	{"cycle-incomplete", "every cycle completes"},
}

func (c *cycle) violate(kind, detail string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, violation{kind, detail})
}

// check checks the invariants after a cycle whose last runs exited 0.
func (s *soak) check(ctx context.Context, c *cycle) {
	mc, err := s.w.get(ctx)
	if err != nil {
		c.violate("cycle-incomplete", "reading the target after the cycle: "+err.Error())
		return
	}
	p := c.plan
	ann := mc.Annotations
	hash := mc.ValuesHash()

	// (1) the ManagedChart's version and values match its annotations and
	// a journal entry
	if mc.Version != p.to {
		c.violate("record", fmt.Sprintf("spec.version is %s after the %s to %s", mc.Version, p.op, p.to))
	}
	if ann[managedchart.AnnotationVersion] != mc.Version {
		c.violate("record", fmt.Sprintf("annotation %s=%q, spec.version %s", managedchart.AnnotationVersion, ann[managedchart.AnnotationVersion], mc.Version))
	}
	if ann[managedchart.AnnotationValuesHash] != hash {
		c.violate("record", fmt.Sprintf("annotation %s=%q, hash of spec.values %s", managedchart.AnnotationValuesHash, ann[managedchart.AnnotationValuesHash], hash))
	}
	if ann[managedchart.AnnotationPreviousVersion] != p.from {
		c.violate("record", fmt.Sprintf("annotation %s=%q, want %s", managedchart.AnnotationPreviousVersion, ann[managedchart.AnnotationPreviousVersion], p.from))
	}
	if ann[managedchart.AnnotationAppliedAt] == "" {
		c.violate("record", "no "+managedchart.AnnotationAppliedAt+" annotation")
	}
	var entries []string
	found := false
	for _, nd := range s.nodes {
		st, err := host.Open(nd.stateDir)
		if err != nil {
			continue
		}
		e, ok, err := st.Load(targetRef, mc.Version)
		switch {
		case err != nil:
			c.violate("journal", fmt.Sprintf("%s: %v", nd.name, err))
		case ok:
			entries = append(entries, fmt.Sprintf("%s: %s→%s valuesSha256=%q completed=%v", nd.name, e.FromVersion, e.ToVersion, e.ValuesHash, e.Completed))
			if e.ValuesHash == hash && e.Completed {
				found = true
			}
		}
	}
	if !found {
		c.violate("journal", fmt.Sprintf("no node's journal has a completed entry for %s %s with valuesSha256 %s; entries: [%s]",
			targetRef, mc.Version, hash, strings.Join(entries, "; ")))
	}

	// (2) exactly one backup Secret per from-version, never rewritten
	bks, err := s.w.backups(ctx)
	if err != nil {
		c.violate("backup", "listing backups: "+err.Error())
	}
	byVersion := map[string][]string{}
	for _, b := range bks {
		v := b.Labels[specobject.LabelBackupVersion]
		byVersion[v] = append(byVersion[v], b.Name)
		sum := sha256.New()
		keys := make([]string, 0, len(b.Data))
		for k := range b.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(sum, "%s=%x;", k, b.Data[k])
		}
		digest := hex.EncodeToString(sum.Sum(nil))
		if prev, ok := s.backupDigest[b.Name]; ok && prev != digest {
			c.violate("backup", fmt.Sprintf("backup %s was rewritten (it is written once)", b.Name))
		}
		s.backupDigest[b.Name] = digest
	}
	for v, names := range byVersion {
		if len(names) != 1 {
			c.violate("backup", fmt.Sprintf("%d backup Secrets for from-version %s: %v", len(names), v, names))
		}
		if v != v1 {
			// every upgrade of the soak is from 1.0.0: a backup of another
			// version means an upgrade started from another state
			c.violate("backup", fmt.Sprintf("a backup of from-version %s: %v", v, names))
		}
		for _, nm := range names {
			if nm != managedchart.BackupName(name, v) {
				c.violate("backup", fmt.Sprintf("backup %s is not named %s", nm, managedchart.BackupName(name, v)))
			}
		}
	}
	if len(byVersion[v1]) == 0 {
		c.violate("backup", "no backup of from-version "+v1)
	}

	// (3) no user value lost
	s.checkValues(ctx, c, mc)

	// (4) never left paused
	if mc.Paused {
		c.violate("paused", "spec.paused is true")
	}
	if v, ok := ann[managedchart.AnnotationPaused]; ok {
		c.violate("paused", fmt.Sprintf("annotation %s=%q left", managedchart.AnnotationPaused, v))
	}

	// (5) no two processes applied: at most one apply log line over all
	// the cycle's processes, and exactly one spec write not made by the
	// soak itself
	applied := 0
	var who []string
	for _, pr := range c.runs {
		if a := pr.applied(); a > 0 {
			applied += a
			who = append(who, pr.label)
		}
	}
	if applied > 1 {
		c.violate("applied-once", fmt.Sprintf("%d apply log lines in one %s: %v", applied, p.op, who))
	}
	toolWrites := mc.Generation - c.before.Generation - c.specWrites
	if toolWrites != 1 {
		c.violate("applied-once", fmt.Sprintf("%d spec writes by chart-upgrader in one %s (generation %d → %d, %d by the soak)",
			toolWrites, p.op, c.before.Generation, mc.Generation, c.specWrites))
	}
	helm := s.w.sim.HelmRuns(namespace, name) - c.helmBefore
	if len(c.restarts) == 0 && int64(helm) > mc.Generation-c.before.Generation {
		// (an API server restart may interrupt a Helm upgrade, which the
		// simulated agent then retries: not counted in those cycles)
		c.violate("helm-runs", fmt.Sprintf("%d Helm runs for %d spec writes", helm, mc.Generation-c.before.Generation))
	}
}

// checkExits: every non-zero exit of the cycle is explained by a fault.
func (s *soak) checkExits(c *cycle) {
	for _, pr := range c.runs {
		if why := s.unexplained(c, pr); why != "" {
			c.violate("unexpected-exit", fmt.Sprintf("%s: %s\n%s", pr.label, why, pr.tail(4)))
		}
	}
}

// checkValues: the installer's customisations are there; after an upgrade
// every value the concurrent writer wrote during it is there; after a
// rollback the values are exactly the backup's.
func (s *soak) checkValues(ctx context.Context, c *cycle, mc *managedchart.ManagedChart) {
	want := map[string]any{
		"storageClass.replicaCount": int64(2),
		"resources.requests.memory": "512Mi",
	}
	for k, v := range s.installer["promote"].(map[string]any) {
		want["promote."+k] = v
	}
	for k, v := range c.writes {
		want[k] = v
	}
	for path, v := range want {
		got, ok := lookup(mc.Values, path)
		if !ok || fmt.Sprint(got) != fmt.Sprint(v) {
			c.violate("values", fmt.Sprintf("%s is %v (set: %v), want %v", path, got, ok, v))
		}
	}
	if c.plan.op == opRollback {
		b, err := specobject.ReadBackup(ctx, s.w.tc.Kube, managedchart.Descriptor, namespace, name, "")
		if err != nil {
			c.violate("values", "reading the backup: "+err.Error())
			return
		}
		bv, _ := values.Normalize(b.Spec["values"]).(map[string]any)
		if bv == nil {
			bv = map[string]any{}
		}
		h, _ := values.Hash(bv)
		if h != mc.ValuesHash() {
			c.violate("values", fmt.Sprintf("after the rollback the values (sha256 %s) are not the backup's (%s)", mc.ValuesHash(), h))
		}
	}
}

func lookup(v map[string]any, path string) (any, bool) {
	var cur any = v
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// unexplained says why a run's exit is not explained by the cycle's
// faults, or "" when it is (or it is 0).
func (s *soak) unexplained(c *cycle, pr *procRun) string {
	switch {
	case pr.code == 0:
		return ""
	case pr.killedByFault():
		return ""
	case pr.code == 3 && c.errBefore[pr]:
		return "" // preflight refused the ErrApplied target, as it must
	case pr.code == 3 && !c.writtenAt.IsZero() && c.writtenAt.Before(pr.end) &&
		strings.Contains(pr.out.String(), "the managedchart is not healthy"):
		// the concurrent writer's change was rolling out when preflight
		// looked: a target that is not Ready is refused, as it must be
		return ""
	}
	for _, w := range c.restarts {
		// a request failing while kube-apiserver is down
		if !pr.start.After(w[1].Add(2*time.Second)) && !pr.end.Before(w[0]) {
			return ""
		}
	}
	return "exit " + pr.exit()
}
