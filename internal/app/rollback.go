package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// RollbackOptions are the inputs of `rollback`.
type RollbackOptions struct {
	Local
	Target        string // KIND/NAMESPACE/NAME
	Version       string // restore the backup taken when upgrading from it; "" → the newest
	Timeout       time.Duration
	NodeName      string
	LeaseDuration time.Duration
	SUC           host.SUC
	Heartbeat     time.Duration
}

// Rollback restores a target from its backup and waits until it is ready.
// Like upgrade it is idempotent: once restored and ready, a re-run writes
// nothing.
func Rollback(ctx context.Context, o RollbackOptions) (err error) {
	o.Log, o.Out = logAndOut(o.Log, o.Out)
	if attrs := o.SUC.Attrs(); len(attrs) > 0 {
		o.Log = o.Log.With(attrs...)
	}
	defer func() { host.WriteTermination(o.TerminationLog, "rolled back", err, o.Log) }()
	if o.Target == "" {
		return outcome.BadInput(errors.New("rollback needs --target KIND/NAMESPACE/NAME"))
	}
	t, err := spec.ParseTarget(o.Target, targets.Kinds())
	if err != nil {
		return outcome.BadInput(fmt.Errorf("--target: %w", err))
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = spec.DefaultWaitTimeout
	}
	sess, err := openSession(ctx, o.Local, o.NodeName, o.LeaseDuration)
	if err != nil {
		return err
	}
	defer sess.close()
	target, lease, err := openTarget(ctx, sess.clients, t, nil, kind.DefaultApply)
	if err != nil {
		return err
	}
	target = wrapTarget(ctx, target)
	runner := sess.runner(ctx, upgrade.Settings{Version: o.Version, LeaseDuration: o.LeaseDuration, Heartbeat: o.Heartbeat,
		Node: o.NodeName, JobName: o.SUC.String(), LeaseAnnotations: leaseAnnotations(o.NodeName, o.SUC), Log: o.Log, Out: o.Out})
	res, err := runner.Run(ctx, upgrade.Job{Target: target, Lease: lease, Timeout: o.Timeout, FailureGrace: spec.DefaultFailureGrace}, upgrade.GoalRollback)
	if err == nil {
		fmt.Fprintf(o.Out, "rolled back %s %s → %s\n", t, res.From, res.To)
		restoreCRDs(ctx, o.Local, sess, target.Ref(), res.To)
	}
	return err
}

// restoreCRDs puts back the CRDs the upgrade from version replaced, as
// they were, where that is safe (crds.Client.Restore), and says what it
// did with each and where the copies are. The chart is rolled back
// whatever happens here: a CRD left as it is serves the objects it holds,
// so a failure is said, not an exit code.
func restoreCRDs(ctx context.Context, o Local, sess *session, ref upgrade.Ref, version string) {
	name := crds.BackupName(ref, version)
	r, err := sess.crds(false).Restore(ctx, ref.Namespace, name)
	if err != nil {
		o.Log.Warn("the CRDs the upgrade replaced were not restored", "error", err.Error())
		fmt.Fprintf(o.Out, "CRDs: not restored (%v); the CRDs as they were at %s are in Secret %s/%s\n", err, version, ref.Namespace, name)
	}
	if r == nil || r.Backup == "" {
		return
	}
	for _, d := range r.Applied {
		fmt.Fprintf(o.Out, "CRD %s restored as it was at %s\n", d.Name, version)
	}
	for _, d := range r.Left {
		fmt.Fprintf(o.Out, "CRD %s left as it is (restoring it is not safe: a rollback never drops a version objects are stored at, nor fields they hold): %s\n",
			d.Name, strings.Join(append(append([]string(nil), d.Refused...), d.Warnings...), "; "))
	}
	if len(r.Left) > 0 {
		fmt.Fprintf(o.Out, "the CRDs as they were at %s are in Secret %s\n", version, r.Backup)
	}
}
