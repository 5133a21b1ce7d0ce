package managedchart

import (
	"fmt"
	"sort"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Evaluate judges readiness exactly as docs/design.md §4.2 says: the target
// carries the applied version and values hash; Bundle mcc-<name> has
// spec.helm.version = target (and the applied values, when they are in the
// Bundle) and has observed its generation; every BundleDeployment applied
// its deploymentID and is ready; the summary says desiredReady > 0 clusters
// all ready, none unavailable, and the Ready condition is True.
//
// It goes over every BundleDeployment: it is the judgement of one look
// (Target.Look), and the reference the Observer's running counts are
// tested against. A watch judges from those counts (Observer.Readiness).
func Evaluate(want upgrade.Want, mc *ManagedChart, b *Bundle, bds []BundleDeployment) upgrade.Readiness {
	c := bdCounts{total: len(bds)}
	for _, bd := range bds {
		switch {
		case !bd.applied():
			c.notApplied++
			if bd.DeployError != "" {
				c.failed++
				c.failure = bd.DeployError
			}
		case !bd.Ready:
			c.notReady++
		}
	}
	c.pendingLines = func() []string {
		pending := make([]string, 0, c.notApplied+c.notReady)
		for _, bd := range bds {
			if v := verdictOf(bd); v.pending() {
				pending = append(pending, v.line(bd.Namespace+"/"+bd.Name))
			}
		}
		sort.Strings(pending)
		if len(pending) > maxPendingLines {
			pending = pending[:maxPendingLines]
		}
		return pending
	}
	return judge(want, mc, b, c)
}

// JudgeBySummary judges readiness as Evaluate does, with the
// BundleDeployments as the Bundle's summary counts them (all desired
// clusters applied and ready) instead of read one by one: it can say ready
// only when the Bundle has observed its generation, carries the wanted
// version and values and its summary, unavailable count and Ready
// condition all say ready. Target.Look uses it to skip the list of
// BundleDeployments; the wait never does.
func JudgeBySummary(want upgrade.Want, mc *ManagedChart, b *Bundle) upgrade.Readiness {
	c := bdCounts{pendingLines: func() []string { return nil }}
	if b != nil {
		c.total = int(b.Status.Summary.DesiredReady)
	}
	return judge(want, mc, b, c)
}

// judge is Evaluate with the BundleDeployments already counted.
func judge(want upgrade.Want, mc *ManagedChart, b *Bundle, c bdCounts) upgrade.Readiness {
	var r upgrade.Readiness
	wait := r.Wait
	if !upgrade.JudgeTarget(&r, "managedchart", mc.Observed(), want) {
		return r
	}
	// Rancher cannot make a Bundle of the chart version (not in the
	// ClusterRepo's index): it keeps the old status and says so here only
	if d, ok := mc.Status.Condition("Defined"); ok && d.Status == "False" {
		msg := d.Message
		if msg == "" {
			msg = d.Reason
		}
		r.Failed = "Rancher cannot define the chart (ManagedChart condition Defined=False): " + msg
	}
	if b == nil {
		wait("bundle %s does not exist yet", BundleName(mc.Name))
		return r
	}
	s := b.Status
	r.ReadyCount, r.DesiredCount = s.Summary.Ready, s.Summary.DesiredReady
	for _, nr := range s.Summary.NonReadyResources {
		r.NonReady = append(r.NonReady, nr.Line())
	}
	if b.HelmVersion != want.Version {
		wait("bundle %s is at version %q, not %q yet", b.Name, b.HelmVersion, want.Version)
	}
	if b.HasValues && want.ValuesHash != "" {
		if b.ValuesHash() != want.ValuesHash {
			wait("bundle %s does not carry the applied values yet", b.Name)
		}
	}
	if s.ObservedGeneration != b.Generation {
		wait("bundle %s generation %d not observed yet (observed %d)", b.Name, b.Generation, s.ObservedGeneration)
	}
	if b.Paused {
		wait("bundle %s is paused", b.Name)
	}
	if c.total == 0 {
		wait("no bundledeployments of %s yet", b.Name)
	}
	if c.notApplied > 0 {
		wait("%d of %d bundledeployments have not applied their deployment", c.notApplied, c.total)
	}
	if c.notReady > 0 {
		wait("%d of %d bundledeployments are not ready", c.notReady, c.total)
	}
	// the agent could not deploy what we applied (ErrApplied): counted
	// only once the Bundle is ours, so BundleDeployments still showing a
	// failure of an older deployment do not count
	if c.failed > 0 && r.Failed == "" && b.HelmVersion == want.Version && s.ObservedGeneration == b.Generation {
		r.Failed = failure(b, c)
	}
	// Fleet lists no non-ready resource: name the first BundleDeployments
	// (the lines are built only then)
	if len(r.NonReady) == 0 && c.notApplied+c.notReady > 0 {
		r.NonReady = c.pendingLines()
	}
	if s.Summary.DesiredReady <= 0 || s.Summary.Ready != s.Summary.DesiredReady {
		wait("bundle summary: %d of %d clusters ready", s.Summary.Ready, s.Summary.DesiredReady)
	}
	if s.Unavailable != 0 {
		wait("bundle %s: %d unavailable", b.Name, s.Unavailable)
	}
	if cond, ok := s.Condition("Ready"); !ok || cond.Status != "True" {
		msg := cond.Message
		if msg == "" {
			msg = "no Ready condition"
		}
		wait("bundle %s is not Ready: %s", b.Name, msg)
	}
	r.Ready = len(r.Waiting) == 0
	return r
}

// failure describes the failed deployment of the Bundle in Fleet's words:
// its Ready message when the Bundle counts the ErrApplied, else the
// message of one failing BundleDeployment. A Helm wait that timed out
// (helm.timeoutSeconds > 0) is a rollout that did not finish.
func failure(b *Bundle, c bdCounts) string {
	msg := c.failure
	if cond, ok := b.Status.Condition("Ready"); ok && cond.Status != "True" && b.Status.Summary.ErrApplied > 0 && cond.Message != "" {
		msg = cond.Message
	}
	head := fmt.Sprintf("ErrApplied: %d of %d bundledeployments could not deploy it", c.failed, c.total)
	if b.HelmTimeoutSeconds > 0 && strings.Contains(msg, "context deadline exceeded") {
		head = fmt.Sprintf("the rollout did not finish within Helm's wait (helm.timeoutSeconds %d) on %d of %d clusters",
			b.HelmTimeoutSeconds, c.failed, c.total)
	}
	return head + ": " + msg
}

// applied reports whether the BundleDeployment applied its current
// deployment.
func (bd BundleDeployment) applied() bool {
	return bd.DeploymentID != "" && bd.AppliedDeploymentID == bd.DeploymentID
}

// Line renders a non-ready resource for a person.
func (n NonReadyResource) Line() string {
	s := n.Name
	if n.State != "" {
		s += " (" + n.State + ")"
	}
	if n.Message != "" {
		s += ": " + n.Message
	}
	for i, d := range n.Details {
		if i == 3 {
			s += fmt.Sprintf("; +%d more", len(n.Details)-3)
			break
		}
		s += "; " + d
	}
	return s
}

// Health is the preflight's judgement of a target before an upgrade: it is
// Ready, with no ErrApplied or Modified clusters. Problems are lines a
// person can act on, naming the offending resources. When drift is all
// that keeps it from Ready (every cluster is Ready or Modified, and Fleet
// names each changed object with its patch), the objects are returned as
// Drift instead, for the preflight to weigh against the live rules.
func Health(mc *ManagedChart, b *Bundle) upgrade.Health {
	s := mc.Status
	where := "managedchart status"
	if b != nil {
		s, where = b.Status, "bundle "+b.Name
	}
	if drift, ok := onlyDrift(s); ok {
		return upgrade.Health{Drift: drift}
	}
	var problems []string
	if s.Summary.ErrApplied > 0 {
		problems = append(problems, fmt.Sprintf("%s: %d cluster(s) in ErrApplied", where, s.Summary.ErrApplied))
	}
	if s.Summary.Modified > 0 {
		problems = append(problems, fmt.Sprintf("%s: %d cluster(s) Modified", where, s.Summary.Modified))
	}
	c, ok := s.Condition("Ready")
	switch {
	case !ok:
		problems = append(problems, fmt.Sprintf("%s has no Ready condition", where))
	case c.Status != "True":
		msg := c.Message
		if msg == "" {
			msg = c.Reason
		}
		problems = append(problems, fmt.Sprintf("%s is not Ready: %s", where, msg))
	}
	if len(problems) > 0 {
		for _, nr := range s.Summary.NonReadyResources {
			problems = append(problems, "  "+nr.Line())
		}
	}
	return upgrade.Health{Problems: problems}
}

// onlyDrift returns the changed objects when drift is all that keeps the
// status from Ready: every desired cluster is Ready or Modified, at least
// one Modified, and each Modified cluster Fleet lists names only changed
// objects (no missing or extra one), all of them listed.
func onlyDrift(s BundleStatus) ([]upgrade.Drift, bool) {
	sum := s.Summary
	others := sum.NotReady + sum.ErrApplied + sum.WaitApplied + sum.OutOfSync + sum.Pending
	if sum.Modified == 0 || others != 0 || sum.DesiredReady == 0 || sum.Ready+sum.Modified != sum.DesiredReady ||
		s.ObservedGeneration == 0 || int64(len(sum.NonReadyResources)) != sum.Modified {
		return nil, false
	}
	var drift []upgrade.Drift
	for _, nr := range sum.NonReadyResources {
		if nr.State != "Modified" || len(nr.Modified) == 0 || len(nr.Modified) != len(nr.Details) {
			return nil, false
		}
		drift = append(drift, nr.Modified...)
	}
	return drift, true
}
