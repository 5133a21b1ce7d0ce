package managedchart

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// fleetMaxHelmHistory is the Helm history Fleet's agent keeps when a
// Bundle sets none (helm.maxHistory 0).
const fleetMaxHelmHistory = 2

// redeploySpec is the spec a rollback writes for the backed-up spec: the
// same chart, version and values, with one field that enters Fleet's
// deploymentID changed, so that Fleet runs Helm again.
//
// Fleet's deploymentID is a hash of the Bundle's content and options
// (without diff and correctDrift, which Fleet leaves out on purpose).
// Restoring the spec as it was gives back the deploymentID the
// BundleDeployments last applied when the upgrade never got applied (an
// ErrApplied upgrade, a rollout Helm gave up on): Fleet counts that as
// applied and runs no Helm action, so Helm's last revision stays the failed
// one and whatever the failed upgrade changed stays as drift. The field:
//
//   - helm timeoutSeconds + 1 when it is set (> 0): Harvester's own way
//     ("bump timeoutSeconds by one"); one second more of Helm's wait
//     changes nothing that is deployed;
//   - otherwise maxHistory: Fleet's default of 2 written out when unset
//     (the same history kept), else one more. Setting timeoutSeconds
//     instead would turn Helm's wait on.
//
// The new value also differs from the one of current, the spec being
// replaced: the backup of a version is written once, so after an earlier
// rollback the spec deployed before this upgrade may already carry the
// backup's value + 1. A second rollback writes nothing (the target already
// has the backup's version and values), so it leads to no second Helm
// action. It returns the new spec and a line saying what it changed.
func redeploySpec(spec, current map[string]any) (map[string]any, string) {
	out := runtime.DeepCopyJSON(spec)
	field, n := "timeoutSeconds", num(out, "timeoutSeconds")
	bumped := n + 1
	if n <= 0 {
		field, n = "maxHistory", num(out, "maxHistory")
		bumped = max(n+1, fleetMaxHelmHistory)
	}
	if bumped == num(current, field) {
		bumped++
	}
	out[field] = bumped
	return out, fmt.Sprintf("spec.%s %d → %d", field, n, bumped)
}
