package managedchart

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// redeployPatchPrefix names the comparePatches entry a rollback adds when
// the chart has no Helm timeout to change (see redeploySpec).
const redeployPatchPrefix = "chart-upgrader-redeploy-"

// redeploySpec is the spec a rollback writes for the backed-up spec: the
// same chart, version and values, with one field that enters Fleet's
// deploymentID changed, so that Fleet runs Helm again.
//
// Fleet's deploymentID is a hash of the Bundle's content and options.
// Restoring the spec as it was gives back the deploymentID the
// BundleDeployments last applied when the upgrade never got applied (an
// ErrApplied upgrade, a rollout Helm gave up on): Fleet counts that as
// applied and runs no Helm action, so Helm's last revision stays the failed
// one and whatever the failed upgrade changed stays as drift. The field:
//
//   - helm timeoutSeconds + 1 when it is set (> 0): Harvester's own way
//     ("bump timeoutSeconds by one"); one second more of Helm's wait
//     changes nothing that is deployed;
//   - otherwise a diff.comparePatches entry for an object that does not
//     exist (ConfigMap chart-upgrader-redeploy-N in the chart's namespace):
//     it makes Fleet ignore nothing, and setting timeoutSeconds would turn
//     Helm's wait on.
//
// The new value also differs from the one of current, the spec being
// replaced: the backup of a version is written once, so after an earlier
// rollback the spec deployed before this upgrade may already carry the
// backup's value + 1. A second rollback writes nothing (the target already
// has the backup's version and values), so it leads to no second Helm
// action. It returns the new spec and a line saying what it changed.
func redeploySpec(spec, current map[string]any) (map[string]any, string) {
	out := runtime.DeepCopyJSON(spec)
	if n := num(out, "timeoutSeconds"); n > 0 {
		bumped := n + 1
		if bumped == num(current, "timeoutSeconds") {
			bumped++
		}
		out["timeoutSeconds"] = bumped
		return out, fmt.Sprintf("spec.timeoutSeconds %d → %d", n, bumped)
	}
	diff, _ := out["diff"].(map[string]any)
	if diff == nil {
		diff = map[string]any{}
	}
	patches, _ := diff["comparePatches"].([]any)
	kept := make([]any, 0, len(patches)+1)
	next := max(1, redeployPatchAfter(spec), redeployPatchAfter(current))
	for _, p := range patches {
		if m, ok := p.(map[string]any); ok && strings.HasPrefix(str(m, "name"), redeployPatchPrefix) {
			continue // ours, from an earlier rollback: replaced
		}
		kept = append(kept, p)
	}
	name := redeployPatchPrefix + strconv.Itoa(next)
	ns, _ := out["defaultNamespace"].(string)
	if ns == "" {
		ns = "default"
	}
	kept = append(kept, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": name,
		"jsonPointers": []any{}})
	diff["comparePatches"] = kept
	out["diff"] = diff
	return out, "spec.diff.comparePatches gains ConfigMap " + ns + "/" + name + " (an object that does not exist)"
}

// redeployPatchAfter is the number after the highest of the comparePatches
// entries an earlier rollback left in spec (0: none).
func redeployPatchAfter(spec map[string]any) int {
	diff, _ := spec["diff"].(map[string]any)
	patches, _ := diff["comparePatches"].([]any)
	after := 0
	for _, p := range patches {
		if m, ok := p.(map[string]any); ok && strings.HasPrefix(str(m, "name"), redeployPatchPrefix) {
			if n, err := strconv.Atoi(strings.TrimPrefix(str(m, "name"), redeployPatchPrefix)); err == nil && n+1 > after {
				after = n + 1
			}
		}
	}
	return after
}
