package managedchart

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// JudgeBySummary judges readiness exactly as docs/design.md §4.2 says,
// from the ManagedChart and its Bundle alone: the target carries the
// applied version and values hash; Bundle mcc-<name> has spec.helm.version
// = target (and the applied values, when they are in the Bundle), is not
// paused and has observed its generation; the summary of that generation
// says desiredReady > 0 clusters all ready, none unavailable, and the
// Ready condition is True. The wait and Target.Look judge with it.
//
// Fleet computes the summary of a generation it has observed from the
// BundleDeployments, counting a cluster ready only when its
// BundleDeployment applied the deployment that generation asks for (the ID
// Fleet computes afresh, whatever its cache holds) and is ready; the stale
// status after a spec change shows as a generation not observed yet. So
// the summary says what reading every BundleDeployment would, without
// reading thousands of them (Evaluate does, for the tests).
func JudgeBySummary(want upgrade.Want, mc *ManagedChart, b *Bundle) upgrade.Readiness {
	var c bdCounts
	if b != nil {
		sum := b.Status.Summary
		c = bdCounts{total: int(sum.DesiredReady), notApplied: int(sum.WaitApplied + sum.ErrApplied + sum.Pending + sum.OutOfSync),
			notReady: int(sum.NotReady + sum.Modified), failed: int(sum.ErrApplied)}
		for _, nr := range sum.NonReadyResources {
			if nr.State == "ErrApplied" && nr.Message != "" {
				c.failure = nr.Message
				break
			}
		}
	}
	return judge(want, mc, b, c)
}

// Confirm checks a ready judgement of Fleet's summary (r, from
// JudgeBySummary) against BundleDeployments read at that moment (every
// one, or a first page of them: sample): the summary can be stale under
// the new observedGeneration (Fleet writes the Bundle status as a merge
// patch against its cache, with no resourceVersion), but each
// BundleDeployment says for itself whether it applied the deployment it is
// asked for and is ready. r stands when every one read agrees; else it is
// not ready, and says why.
func Confirm(r upgrade.Readiness, b *Bundle, bds []BundleDeployment, sample bool) upgrade.Readiness {
	if !r.Ready {
		return r
	}
	var behind []string
	for _, bd := range bds {
		switch {
		case !bd.applied():
			behind = append(behind, bd.Namespace+"/"+bd.Name+" has not applied its deployment")
		case !bd.Ready:
			behind = append(behind, bd.Namespace+"/"+bd.Name+" is not ready")
		}
	}
	if len(bds) > 0 && len(behind) == 0 {
		return r
	}
	if len(bds) == 0 && sample {
		return r // a page of none while more exist: nothing to go by
	}
	read := fmt.Sprintf("%d", len(bds))
	if sample {
		read = fmt.Sprintf("the first %d", len(bds))
	}
	out := upgrade.Readiness{ReadyCount: r.ReadyCount, DesiredCount: r.DesiredCount, Unit: r.Unit, NonReady: r.NonReady}
	out.Wait("bundle %s's summary says ready, its BundleDeployments do not yet (a status Fleet wrote before they reported): of %s read, %d behind",
		b.Name, read, len(behind))
	if len(bds) == 0 {
		out.Wait("bundle %s has no BundleDeployment", b.Name)
	}
	out.Waiting = append(out.Waiting, behind[:min(len(behind), maxPendingLines)]...)
	return out
}

// ConfirmFailure checks a failure judgement of Fleet's summary (r: its
// ErrApplied) against BundleDeployments read at that moment: Fleet counts
// ErrApplied from every BundleDeployment whose Deployed condition is
// False, also when that condition was set for a deployment before the one
// it is asked for now (the agent has not tried the new one yet). When
// every failure read is older than its BundleDeployment's spec by at least
// olderBy, the failure is not this deployment's: r waits instead, and says
// why.
func ConfirmFailure(r upgrade.Readiness, b *Bundle, bds []BundleDeployment) upgrade.Readiness {
	if r.Failed == "" {
		return r
	}
	var older []string
	for _, bd := range bds {
		if bd.DeployError == "" {
			continue
		}
		if bd.DeployErrorAt.IsZero() || bd.SpecAt.IsZero() || bd.SpecAt.Sub(bd.DeployErrorAt) < olderBy {
			return r // a failure of the deployment asked now
		}
		older = append(older, fmt.Sprintf("%s/%s (Deployed=False since %s, its deployment asked at %s)", bd.Namespace, bd.Name,
			bd.DeployErrorAt.UTC().Format(time.RFC3339), bd.SpecAt.UTC().Format(time.RFC3339)))
	}
	if len(older) == 0 {
		return r
	}
	r.Failed = ""
	r.Ready = false
	r.Waiting = append([]string{fmt.Sprintf("bundle %s counts ErrApplied, but the failure is an older deployment's: Fleet's agent has not tried this one yet: %s",
		b.Name, strings.Join(older[:min(len(older), 3)], "; "))}, r.Waiting...)
	return r
}

// olderBy is how much older than a BundleDeployment's spec a failure must
// be to be an older deployment's. Both times are whole seconds, and a
// failure the agent reported on the deployment before, just ahead of the
// new spec, recurs unchanged on the new one (wrangler leaves an unchanged
// condition's time alone): within this margin it counts as this
// deployment's, as it always did.
const olderBy = 2 * time.Second

// Evaluate is JudgeBySummary with the BundleDeployments read one by one
// and counted here (every one applied its deploymentID and is ready):
// the reference the summary judgement is tested against, and the soak
// test's oracle.
func Evaluate(want upgrade.Want, mc *ManagedChart, b *Bundle, bds []BundleDeployment) upgrade.Readiness {
	c := bdCounts{total: len(bds)}
	var pending []string
	for _, bd := range bds {
		line := bd.Namespace + "/" + bd.Name
		switch {
		case !bd.applied() && bd.DeployError != "":
			c.notApplied++
			c.failed++
			c.failure = bd.DeployError
			line += " failed to deploy: " + bd.DeployError
		case !bd.applied():
			c.notApplied++
			line += " not applied"
		case !bd.Ready:
			c.notReady++
			line += " not ready"
			if len(bd.NonReady) > 0 {
				line += ": " + bd.NonReady[0]
			}
		default:
			continue
		}
		pending = append(pending, line)
	}
	sort.Strings(pending)
	c.pending = pending[:min(len(pending), maxPendingLines)]
	return judge(want, mc, b, c)
}

// maxPendingLines is how many pending BundleDeployments Evaluate names
// when Fleet's summary names none.
const maxPendingLines = 10

// bdCounts is what readiness needs of a Bundle's BundleDeployments, one
// per cluster: how many there are, how many have not applied their
// deployment, how many applied it and are not ready.
type bdCounts struct {
	total, notApplied, notReady int
	// failed of the notApplied report that the agent could not deploy
	// (Deployed=False, Fleet's ErrApplied); failure is one of their
	// messages.
	failed  int
	failure string
	// pending names the first pending ones (Evaluate only).
	pending []string
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
		wait("no clusters of %s yet", b.Name)
	}
	if c.notApplied > 0 {
		wait("%d of %d clusters have not applied the deployment", c.notApplied, c.total)
	}
	if c.notReady > 0 {
		wait("%d of %d clusters are not ready", c.notReady, c.total)
	}
	// the agent could not deploy what we applied (ErrApplied): counted
	// only once the Bundle is ours, so BundleDeployments still showing a
	// failure of an older deployment do not count
	if c.failed > 0 && r.Failed == "" && b.HelmVersion == want.Version && s.ObservedGeneration == b.Generation {
		r.Failed = failure(b, c)
	}
	// Fleet lists no non-ready resource: name the first BundleDeployments
	if len(r.NonReady) == 0 {
		r.NonReady = c.pending
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
// message of one failing cluster. A Helm wait that timed out
// (helm.timeoutSeconds > 0) is a rollout that did not finish.
func failure(b *Bundle, c bdCounts) string {
	msg := c.failure
	if cond, ok := b.Status.Condition("Ready"); ok && cond.Status != "True" && b.Status.Summary.ErrApplied > 0 && cond.Message != "" {
		msg = cond.Message
	}
	head := fmt.Sprintf("ErrApplied: %d of %d clusters could not deploy it", c.failed, c.total)
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
	if b != nil && s.ObservedGeneration > 0 && s.Summary.DesiredReady == 0 {
		// Fleet counts this Ready: nothing to wait for would ever come
		return upgrade.Health{Problems: []string{fmt.Sprintf("bundle %s matches no cluster (desiredReady 0): Fleet calls it Ready with nothing deployed, "+
			"and no upgrade of it could ever be seen ready; check the ManagedChart's targets (spec.targets, the clusters' labels)", b.Name)}}
	}
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
