package app

import (
	"context"
	"errors"
	"fmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		// the CRDs the upgrade replaced stay: say where their copies are
		ref := target.Ref()
		name := crds.BackupName(ref, res.To)
		if _, gerr := sess.clients.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			fmt.Fprintf(o.Out, "CRDs left as they are (a rollback never deletes a CRD nor drops a version objects may be stored at); "+
				"the CRDs as they were at %s are in Secret %s/%s\n", res.To, ref.Namespace, name)
		}
	}
	return err
}
