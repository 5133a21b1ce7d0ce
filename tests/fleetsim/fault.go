package fleetsim

import (
	"time"
)

// Fault makes the simulated Fleet misbehave for one ManagedChart. The zero
// Fault is a healthy chart. Faults combine; they take effect at once, also
// on a chart that is already deployed.
type Fault struct {
	// Delay holds back readiness this long after the agent applied a new
	// deployment (after the Helm upgrade): the BundleDeployments report the
	// new deployment NotReady meanwhile.
	Delay time.Duration
	// NeverReady: deployments are applied but never become ready.
	NeverReady bool
	// ErrApplied makes deploying fail with this message: on the local
	// cluster Helm really runs and fails (the chart gains an object the API
	// server refuses, so Helm writes a failed revision),
	// appliedDeploymentID stays, the Deployed condition is False and the
	// summary counts errApplied with this message. The agent retries with
	// a back-off (Options.RetryBackoff), each attempt a failed revision.
	ErrApplied string
	// ErrAppliedVersion limits ErrApplied to the deployments of this chart
	// version (a version whose chart cannot be deployed); "" fails every
	// deployment.
	ErrAppliedVersion string
	// Stale freezes reporting: the Bundle and BundleDeployment specs still
	// follow the ManagedChart, but no Helm upgrade runs and no status is
	// written, so the old status (Ready, old observedGeneration, old
	// appliedDeploymentID) stays. Clearing it catches up.
	Stale bool
	// ReadyOverTime spreads readiness over the clusters: cluster i (of n)
	// becomes ready (i+1)/n of this duration after it applied (after Delay).
	ReadyOverTime time.Duration
	// StatusRace replays the race of Fleet's bundle controller: its status
	// write is a JSON merge patch computed against its cached Bundle, with
	// no resourceVersion, so when the previous generation's Ready status
	// was still on its way into the cache, the patch for a new generation
	// carries observedGeneration alone. For this long after a Bundle's
	// generation changes, its status is that: the new observedGeneration
	// over the previous generation's summary and conditions (Ready, when
	// it was). Then the controller catches up.
	StatusRace time.Duration
	// AgentHold holds the agent: it neither deploys nor reports anything
	// new for the chart's BundleDeployments (a slow or restarting agent),
	// while the bundle controller goes on summarising what they show.
	// Clearing it lets the agent catch up.
	AgentHold bool
	// NoClusters makes the Bundle match no cluster (its targets select
	// none): the bundle controller summarises zero BundleDeployments,
	// desiredReady 0, which Fleet calls Ready.
	NoClusters bool
}

// Resource names a Kubernetes object the agent found modified (drift).
type Resource struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// Patch is shown for a modified resource (a JSON merge patch that
	// would restore what the chart renders).
	Patch string
	// Missing: the object does not exist.
	Missing bool
}

// ReadyTimes are when the simulator sent the last status writes that
// reported a chart ready for its current Bundle generation: the Bundle's,
// then the ManagedChart's copy.
type ReadyTimes struct {
	Bundle       time.Time
	ManagedChart time.Time
}

// SetFault sets the fault of ManagedChart namespace/name (the zero Fault
// clears it) and re-evaluates the chart's Bundle and BundleDeployments; a
// failed deployment waiting out its retry back-off is retried at once.
func (s *Sim) SetFault(namespace, name string, f Fault) {
	k := key(namespace, name)
	s.mu.Lock()
	if isZero(f) {
		delete(s.faults, k)
	} else {
		s.faults[k] = f
	}
	for bd, fl := range s.failures {
		if fl.chart == k {
			delete(s.failures, bd) // a new fault: the next attempt is due now
		}
	}
	s.mu.Unlock()
	s.touchChart(namespace, name)
}

// Fault returns the fault set for ManagedChart namespace/name.
func (s *Sim) Fault(namespace, name string) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults[key(namespace, name)]
}

func isZero(f Fault) bool { return f == Fault{} }

// HelmRuns counts the Helm installs and upgrades the agent made for
// ManagedChart namespace/name: the ones that wrote a revision Helm did not
// fail at once (a failed deployment's attempts are not counted; Helm's
// history shows them).
func (s *Sim) HelmRuns(namespace, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.helmRuns[key(namespace, name)]
}

// LastStatusWrite is when the simulator last sent a Bundle status write
// that reported ManagedChart namespace/name ready for the Bundle's current
// generation, every BundleDeployment having reported before: the earliest
// moment a client can see the chart ready. It is noted just before the
// request goes out (a watcher may see the write before the simulator sees
// the response), so a detection latency measured from it is never negative.
// Zero if never. The ManagedChart's copy follows (ReadyTimes).
func (s *Sim) LastStatusWrite(namespace, name string) time.Time {
	return s.ReadyTimes(namespace, name).Bundle
}

// ReadyTimes returns the send times of the last ready status writes of
// ManagedChart namespace/name.
func (s *Sim) ReadyTimes(namespace, name string) ReadyTimes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready[key(namespace, name)]
}

func (s *Sim) recordHelmRun(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.helmRuns[key(namespace, name)]++
}

// recordReady notes now as the send time of a ready status write of the
// Bundle (bundle) or the ManagedChart (mc) of namespace/name, and returns a
// function that takes the note back if the write fails.
func (s *Sim) recordReady(namespace, name string, bundle, mc bool) (undo func()) {
	if !bundle && !mc {
		return func() {}
	}
	k := key(namespace, name)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.ready[k]
	r := prev
	if bundle {
		r.Bundle = now
	}
	if mc {
		r.ManagedChart = now
	}
	s.ready[k] = r
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ready[k] == r {
			s.ready[k] = prev
		}
	}
}

func key(namespace, name string) string { return namespace + "/" + name }
