package phase

import (
	"context"
	"fmt"
)

// verifyPhase records completion in the journal, prints the summary and
// releases the Lease when this process held it.
type verifyPhase struct{}

func (verifyPhase) Name() string { return "verify" }

func (verifyPhase) Run(ctx context.Context, s *State) error {
	if s.Situation != SituationDone {
		return fmt.Errorf("%s is not ready (situation %s)", s.Ref(), s.Situation)
	}
	s.Entry.Completed = true
	if s.Leader && s.lease != nil {
		if s.stopLease != nil {
			s.stopLease()
			s.stopLease = nil
		}
		if err := s.lease.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}
