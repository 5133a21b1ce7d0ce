package drainpredict

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

// planRule is system-upgrade-controller's own timing of the drain its
// Job runs (pkg/upgrade/job): an integer spec.drain.timeout is passed to
// kubectl as that many nanoseconds, so the drain gives up at once; no
// timeout makes kubectl wait forever, and the Job's activeDeadlineSeconds
// (600 s unless the controller says otherwise) then kills the Job with
// the node left cordoned (SUC uncordons only after a Job that
// completes).
type planRule struct{}

func (planRule) Name() string { return "plan" }

func (planRule) Reads() []rbacv1.PolicyRule { return nil } // the Plan is read before (RBAC)

func (planRule) Judge(_ context.Context, w *World, p *Prediction) error {
	plan := w.opts.Plan
	if plan == nil {
		return nil
	}
	where := fmt.Sprintf("Plan %s/%s", plan.Namespace, plan.Name)
	if plan.TimeoutNanos != nil && len(w.Evict) > 0 {
		p.block(Finding{Rule: "plan", Why: fmt.Sprintf("%s: spec.drain.timeout %d is an integer, which system-upgrade-controller passes to kubectl as %s: the drain gives up before any pod is gone",
			where, *plan.TimeoutNanos, time.Duration(*plan.TimeoutNanos)), Unblock: fmt.Sprintf("write the timeout as a duration string, e.g. \"%ds\"", *plan.TimeoutNanos)})
	}
	deadline := "no deadline"
	if plan.Deadline > 0 {
		deadline = fmt.Sprintf("its activeDeadlineSeconds (%s", plan.Deadline)
		if plan.DeadlineFromController {
			deadline += ", the controller's default unless SYSTEM_UPGRADE_JOB_ACTIVE_DEADLINE_SECONDS says otherwise"
		}
		deadline += ")"
	}
	if plan.TimeoutWritten == "" {
		why := fmt.Sprintf("%s sets no spec.drain.timeout: kubectl waits forever on a refused eviction", where)
		if plan.Deadline > 0 {
			why += "; the Job is killed at " + deadline + " and the node stays cordoned"
		}
		p.warn(Finding{Rule: "plan", Why: why, Unblock: "set spec.drain.timeout (a duration string) below the Job's deadline"})
	} else if plan.TimeoutNanos == nil && plan.Deadline > 0 {
		if d, err := time.ParseDuration(plan.TimeoutWritten); err == nil && d > plan.Deadline {
			p.warn(Finding{Rule: "plan", Why: fmt.Sprintf("%s: spec.drain.timeout %s is longer than %s: a drain that hangs is killed by the deadline with the node cordoned", where, plan.TimeoutWritten, deadline)})
		}
	}
	return nil
}
