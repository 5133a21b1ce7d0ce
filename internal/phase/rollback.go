package phase

import (
	"context"
	"errors"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Rollback restores a target's spec from its backup Secret (the newest,
// or the one from --version) and waits until it is ready. Like upgrade it
// is idempotent: once restored and ready, a re-run writes nothing.
func Rollback(ctx context.Context, opts Options) (err error) {
	opts.defaults()
	defer func() { writeTermination(opts, "rolled back", err) }()
	if opts.Target == "" {
		return outcome.BadInput(errors.New("rollback needs --target managedchart/NAMESPACE/NAME"))
	}
	t, err := spec.ParseTarget(opts.Target)
	if err != nil {
		return outcome.BadInput(fmt.Errorf("--target: %w", err))
	}
	sess, err := openSession(ctx, &opts)
	if err != nil {
		return err
	}
	defer sess.close()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = spec.DefaultWaitTimeout
	}
	s := &State{Opts: &opts, Env: sess.env, Journal: sess.store, Identity: sess.identity,
		Chart: spec.Chart{Target: t, Wait: spec.Wait{Timeout: timeout}}, events: &Events{Component: "chart-upgrader"}}
	defer s.close()
	err = run(ctx, s, []Phase{
		restorePhase{}, // read the target and its backup; the situation
		applyPhase{},   // one process writes the backed-up spec back
		waitPhase{},    // until the restored version is ready
		verifyPhase{},  // journal; a Lease a killed run of this node left behind
	})
	if err == nil {
		fmt.Fprintf(opts.Out, "rolled back %s %s → %s\n", s.Ref(), s.From, s.To)
	}
	return err
}

// restorePhase reads the target and the backup to restore, and works out
// whether the restore is still to do. It makes no writes.
type restorePhase struct{}

func (restorePhase) Name() string { return "restore" }

func (restorePhase) Run(ctx context.Context, s *State) error {
	t := s.Chart.Target
	mc, found, err := s.Env.Target.Get(ctx, t.Namespace, t.Name)
	if err != nil {
		return err
	}
	if !found {
		return outcome.Refused(fmt.Errorf("managedchart %s/%s not found", t.Namespace, t.Name))
	}
	backup, err := s.Env.Target.ReadBackup(ctx, t.Namespace, t.Name, s.Opts.Version)
	if err != nil {
		return outcome.Refused(fmt.Errorf("nothing to roll back to: %w", err))
	}
	vals, _ := values.Normalize(backup.Spec["values"]).(map[string]any)
	if vals == nil {
		vals = map[string]any{}
	}
	hash, err := values.Hash(vals)
	if err != nil {
		return err
	}
	s.MC, s.Restore = mc, backup
	s.From, s.To = mc.Version, backup.Version
	s.Want = target.Want{Version: backup.Version, ValuesHash: hash}
	ready := false
	if w, ok := mc.AppliedWant(); ok && w == s.Want {
		b, bds, err := s.Env.Target.Look(ctx, mc)
		if err != nil {
			return err
		}
		ready = target.Evaluate(s.Want, mc, b, bds).Ready
	}
	s.Situation = Assess(mc, s.To, ready)
	if s.Situation != SituationDone && s.Situation != SituationApplied {
		s.Situation = SituationUpgrade // restore whatever the versions say
	}
	s.Opts.Log.Info("restore", "backup", backup.Name, "from", s.From, "to", s.To, "situation", string(s.Situation))
	return nil
}
