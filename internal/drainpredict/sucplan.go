package drainpredict

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// This file reads a system-upgrade-controller Plan's drain as the
// controller's Job runs it (pkg/upgrade/job, pkg/upgrade/plan of SUC):
// `kubectl drain NODE --pod-selector '!upgrade.cattle.io/controller,…'`
// with --ignore-daemonsets and --delete-emptydir-data unless the Plan
// turns them off, --force, --disable-eviction and
// --skip-wait-for-delete-timeout as written, --timeout as written (an
// integer as nanoseconds), and the Job's activeDeadlineSeconds.

var plansResource = schema.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"}

// sucControllerLabel is on every pod of SUC's Jobs: the drain leaves them.
const sucControllerLabel = "upgrade.cattle.io/controller"

// DefaultJobDeadline is SUC's SYSTEM_UPGRADE_JOB_ACTIVE_DEADLINE_SECONDS
// default.
const DefaultJobDeadline = 600 * time.Second

// PlanDrain is the drain of Plan namespace/name: ok false when the Plan
// has no spec.drain (its Jobs drain nothing). A Plan that does not exist,
// or whose drain does not read, is outcome.ErrBadInput.
func PlanDrain(ctx context.Context, c Clients, namespace, name string) (d Drain, plan *Plan, ok bool, err error) {
	if c.Dynamic == nil {
		return Drain{}, nil, false, fmt.Errorf("reading Plan %s/%s: no dynamic client", namespace, name)
	}
	u, err := c.Dynamic.Resource(plansResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Drain{}, nil, false, outcome.BadInput(fmt.Errorf("--plan: Plan %s/%s not found (is system-upgrade-controller's CRD installed, and is this the Plan's namespace?)", namespace, name))
	}
	if err != nil {
		return Drain{}, nil, false, fmt.Errorf("reading Plan %s/%s: %w", namespace, name, err)
	}
	return DrainOfPlan(u)
}

// DrainOfPlan is PlanDrain on a Plan already read.
func DrainOfPlan(u *unstructured.Unstructured) (d Drain, plan *Plan, ok bool, err error) {
	where := fmt.Sprintf("Plan %s/%s", u.GetNamespace(), u.GetName())
	bad := func(field string, e error) error {
		return outcome.BadInput(fmt.Errorf("%s: %s: %w", where, field, e))
	}
	plan = &Plan{Namespace: u.GetNamespace(), Name: u.GetName()}
	plan.Concurrency, _, _ = unstructured.NestedInt64(u.Object, "spec", "concurrency")
	plan.Applying, _, _ = unstructured.NestedStringSlice(u.Object, "status", "applying")
	switch secs, found, e := unstructured.NestedFieldNoCopy(u.Object, "spec", "jobActiveDeadlineSecs"); {
	case e != nil:
		return d, nil, false, bad("spec.jobActiveDeadlineSecs", e)
	case !found || secs == nil:
		plan.Deadline, plan.DeadlineFromController = DefaultJobDeadline, true
	default:
		n, isInt := secs.(int64)
		if !isInt {
			return d, nil, false, bad("spec.jobActiveDeadlineSecs", fmt.Errorf("%v is not an integer", secs))
		}
		if n < 0 {
			plan.Deadline, plan.DeadlineFromController = DefaultJobDeadline, true
		} else {
			plan.Deadline = time.Duration(n) * time.Second
		}
	}
	spec, found, _ := unstructured.NestedMap(u.Object, "spec", "drain")
	if !found || spec == nil {
		return d, plan, false, nil
	}
	on := func(key string) (bool, error) { // nil or true: on
		v, ok := spec[key]
		if !ok || v == nil {
			return true, nil
		}
		b, isBool := v.(bool)
		if !isBool {
			return false, bad("spec.drain."+key, fmt.Errorf("%v is not a boolean", v))
		}
		return b, nil
	}
	if d.IgnoreDaemonSets, err = on("ignoreDaemonSets"); err != nil {
		return d, nil, false, err
	}
	deleteLocal, err := on("deleteLocalData")
	if err != nil {
		return d, nil, false, err
	}
	deleteEmptyDir, err := on("deleteEmptydirData")
	if err != nil {
		return d, nil, false, err
	}
	d.DeleteEmptyDirData = deleteLocal && deleteEmptyDir
	d.Force, _, _ = unstructured.NestedBool(spec, "force")
	d.DisableEviction, _, _ = unstructured.NestedBool(spec, "disableEviction")
	skip, _, _ := unstructured.NestedInt64(spec, "skipWaitForDeleteTimeout")
	d.SkipWaitForDeleteTimeout = int(skip)
	switch t := spec["timeout"].(type) {
	case nil:
	case int64:
		plan.TimeoutNanos, plan.TimeoutWritten = &t, fmt.Sprint(t)
		d.Timeout = time.Duration(t)
	case string:
		plan.TimeoutWritten = t
		if d.Timeout, err = time.ParseDuration(t); err != nil {
			return d, nil, false, bad("spec.drain.timeout", err)
		}
	default:
		return d, nil, false, bad("spec.drain.timeout", fmt.Errorf("%v is neither an integer nor a duration", t))
	}
	sel, err := sucPodSelector(spec["podSelector"])
	if err != nil {
		return d, nil, false, bad("spec.drain.podSelector", err)
	}
	d.PodSelector = sel
	return d, plan, true, nil
}

// sucPodSelector is the --pod-selector SUC gives kubectl: its own pods
// left out, then the Plan's podSelector's requirements.
func sucPodSelector(raw any) (string, error) {
	own, err := labels.NewRequirement(sucControllerLabel, selection.DoesNotExist, nil)
	if err != nil {
		return "", err
	}
	parts := []string{own.String()}
	if m, ok := raw.(map[string]any); ok && len(m) > 0 {
		var ls metav1.LabelSelector
		if err := runtimeFromUnstructured(m, &ls); err != nil {
			return "", err
		}
		s, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			return "", err
		}
		reqs, selectable := s.Requirements()
		if !selectable {
			return "", fmt.Errorf("%s is not selectable", s)
		}
		for _, r := range reqs {
			parts = append(parts, r.String())
		}
	}
	return strings.Join(parts, ","), nil
}

func runtimeFromUnstructured(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}
