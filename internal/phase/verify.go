package phase

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/journal"
)

// verifyPhase records completion in the journal, prints the summary and
// releases the Lease when this node holds it (taken by this run, or by an
// earlier run of this node that was killed before it released it).
type verifyPhase struct{}

func (verifyPhase) Name() string { return "verify" }

func (verifyPhase) Run(ctx context.Context, s *State) error {
	if s.Situation != SituationDone {
		return fmt.Errorf("%s is not ready (situation %s)", s.Ref(), s.Situation)
	}
	s.Entry.Completed = true
	// Release also when this run did not take the Lease: a run of this node
	// killed before it released it still holds it under the same identity.
	// Release reads first and writes only when the Lease is ours.
	if s.lease == nil && s.MC != nil {
		s.lease = &journal.Lease{Client: s.Env.Kube, Namespace: s.MC.Namespace, Name: journal.LeaseName(s.MC.Name),
			Identity: s.Identity, Duration: s.Opts.LeaseDuration}
	}
	return s.releaseLease(ctx)
}
