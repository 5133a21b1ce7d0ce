package phase

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/chart-upgrader/chart-upgrader/internal/journal"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
)

// maxConflicts bounds the re-read, re-merge, retry loop of an apply.
const maxConflicts = 10

// applyPhase makes exactly one process in the cluster write the target: it
// takes the Lease (or waits while another process applies), writes the
// backup Secret once, then makes one update of spec.version, spec.values and
// spec.paused=false with the resourceVersion it read. On a conflict it
// re-reads, re-merges and retries, so a concurrent change is never lost.
// Nothing to change, or already applied → no write.
//
// It gives the Lease up as soon as the target carries the record of the
// apply (or was found applied): from then on that record tells every other
// process what was done, so holding the Lease through the wait would only
// cost a renewal every third of its duration.
type applyPhase struct{}

func (applyPhase) Name() string { return "apply" }

func (applyPhase) Run(ctx context.Context, s *State) error {
	if s.Situation == SituationDone || s.Situation == SituationApplied {
		return nil
	}
	if s.NoChange {
		s.Opts.Log.Info("nothing to change: the managedchart already has this version and these values")
		return nil
	}
	if err := takeLease(ctx, s); err != nil {
		return err
	}
	if err := applyHoldingLease(ctx, s); err != nil {
		return err
	}
	return s.releaseLease(ctx)
}

// applyHoldingLease is the apply proper, once this process holds the Lease.
func applyHoldingLease(ctx context.Context, s *State) error {
	if s.Situation == SituationDone || s.Situation == SituationApplied || s.NoChange {
		return nil
	}
	if s.Restore == nil {
		created, err := s.Env.Target.EnsureBackup(ctx, s.MC)
		if err != nil {
			return err
		}
		if created {
			s.Opts.Log.Info("backup written", "secret", target.BackupName(s.MC.Name, s.MC.Version))
		}
	}
	for attempt := 1; ; attempt++ {
		select {
		case <-s.leaseLost:
			return fmt.Errorf("lost the lease %s to another process before writing", journal.LeaseName(s.MC.Name))
		default:
		}
		if s.Opts.BeforeUpdate != nil {
			s.Opts.BeforeUpdate(ctx, attempt)
		}
		mc, err := s.Env.Target.Apply(ctx, s.MC, s.update())
		if err == nil {
			s.MC, s.Situation = mc, SituationApplied
			s.Opts.Log.Info("applied", "version", s.To, "values_sha256", s.Want.ValuesHash, "attempts", attempt)
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == maxConflicts {
			return err
		}
		s.Opts.Log.Info("the managedchart changed since it was read: re-reading and merging again", "attempt", attempt)
		if err := reread(ctx, s); err != nil {
			return err
		}
		if s.Situation == SituationApplied || s.Situation == SituationDone || s.NoChange {
			return nil
		}
	}
}

// update is the one write of the apply: the merged values at the target
// version, or, for a rollback, the whole backed-up spec.
func (s *State) update() target.Update {
	up := target.Update{Version: s.To, Unpause: true,
		Annotations: map[string]string{
			target.AnnotationVersion:         s.To,
			target.AnnotationValuesHash:      s.Want.ValuesHash,
			target.AnnotationAppliedAt:       time.Now().UTC().Format(time.RFC3339),
			target.AnnotationPreviousVersion: s.From,
			target.AnnotationPaused:          "", // we unpause: drop our pause mark
		}}
	if s.Restore != nil {
		up.Spec = s.Restore.Spec
	} else {
		up.Values = s.Merge.Values
	}
	return up
}

// reread reads the target again and, unless it is already applied, merges
// again on what it holds now (a rollback restores the backup as it is). A
// target whose version and values are those the merge read keeps that
// merge: merging again would only read the live objects once more.
func reread(ctx context.Context, s *State) error {
	mc, found, err := s.Env.Target.Get(ctx, s.MC.Namespace, s.MC.Name)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("managedchart %s disappeared", s.Ref())
	}
	s.MC = mc
	if w, ok := mc.AppliedWant(); ok && w.Version == s.To && w.ValuesHash == mc.ValuesHash() && mc.Version == s.To {
		s.Situation, s.Want = SituationApplied, w
		return nil
	}
	if s.Restore != nil || (s.Merge != nil && s.MergedFrom == mergeKey(mc)) {
		return nil
	}
	return computeMerge(ctx, s)
}

// takeLease returns once this process holds the target's Lease (it then
// renews it until the apply gives it up) or once another process has
// applied the target (s.Situation is then applied). While another live process holds it, it
// watches the target, and tries again when the holder's lease may expire.
func takeLease(ctx context.Context, s *State) error {
	s.lease = &journal.Lease{Client: s.Env.Kube, Namespace: s.MC.Namespace, Name: journal.LeaseName(s.MC.Name),
		Identity: s.Identity, Duration: s.Opts.LeaseDuration, Annotations: s.leaseAnnotations()}
	for {
		held, holder, err := s.lease.TryAcquire(ctx)
		if err != nil {
			return err
		}
		if held {
			s.Leader = true
			s.stopLease, s.leaseLost = s.lease.Hold(ctx)
			// the previous holder may have applied, or the target changed
			return reread(ctx, s)
		}
		s.Opts.Log.Info("another process is applying this target; waiting for it", "holder", holder)
		applied, err := waitForOther(ctx, s)
		if err != nil {
			return err
		}
		if applied {
			return nil
		}
	}
}

// leaseAnnotations name the Job holding the Lease, for a person reading it.
func (s *State) leaseAnnotations() map[string]string {
	ann := map[string]string{}
	for k, v := range map[string]string{
		"chart-upgrader.io/node": s.Opts.NodeName, "chart-upgrader.io/plan": s.Opts.SUC.Plan,
		"chart-upgrader.io/plan-hash": s.Opts.SUC.PlanHash, "chart-upgrader.io/pod": s.Opts.SUC.Pod,
		"chart-upgrader.io/pod-uid": s.Opts.SUC.PodUID, "chart-upgrader.io/version": s.To,
	} {
		if v != "" {
			ann[k] = v
		}
	}
	return ann
}

// waitForOther watches the target until another process has applied it
// (true) or the Lease may have expired (false: try to take it).
func waitForOther(ctx context.Context, s *State) (bool, error) {
	obs, err := observe(ctx, s)
	if err != nil {
		return false, err
	}
	retry := time.NewTimer(s.Opts.LeaseDuration / 2)
	defer retry.Stop()
	for {
		mc, _, _ := obs.Snapshot()
		if mc != nil {
			if w, ok := mc.AppliedWant(); ok && w.Version == s.To && w.ValuesHash == mc.ValuesHash() && mc.Version == s.To {
				s.MC, s.Situation, s.Want = mc, SituationApplied, w
				s.Opts.Log.Info("another process applied the target", "version", w.Version)
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-obs.Changed():
		case <-retry.C:
			return false, nil
		}
	}
}

// observe starts (once) the watch of the target and what Fleet makes of it.
func observe(ctx context.Context, s *State) (*target.Observer, error) {
	if s.observer != nil {
		return s.observer, nil
	}
	octx, cancel := context.WithCancel(ctx)
	obs, err := s.Env.Target.Observe(octx, s.MC.Namespace, s.MC.Name)
	if err != nil {
		cancel()
		return nil, err
	}
	s.observer, s.stopObserver = obs, cancel
	return obs, nil
}

// releaseLease stops renewing the Lease and gives it up, once per run.
// Releasing a Lease this node does not hold writes nothing.
func (s *State) releaseLease(ctx context.Context) error {
	if s.stopLease != nil {
		s.stopLease()
		s.stopLease = nil
	}
	if s.lease == nil || s.leaseReleased {
		return nil
	}
	if err := s.lease.Release(ctx); err != nil {
		return err
	}
	s.leaseReleased = true
	return nil
}

// close stops what the phases started: the watch and the lease renewal.
func (s *State) close() {
	if s.stopObserver != nil {
		s.stopObserver()
	}
	if s.stopLease != nil {
		s.stopLease()
	}
}
