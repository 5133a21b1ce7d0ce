package managedchart

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedeploySpecBumpsTheHelmTimeout(t *testing.T) {
	spec := map[string]any{"chart": "harvester", "version": "1.3.2", "timeoutSeconds": int64(600), "values": map[string]any{"a": int64(1)}}
	out, line := redeploySpec(spec, map[string]any{"version": "1.4.0", "timeoutSeconds": int64(600)})
	assert.Equal(t, int64(601), out["timeoutSeconds"])
	assert.Equal(t, "spec.timeoutSeconds 600 → 601", line)
	assert.Equal(t, int64(600), spec["timeoutSeconds"], "the backup is not changed")
	assert.Equal(t, spec["values"], out["values"])
	assert.Equal(t, "1.3.2", out["version"])
	again, _ := redeploySpec(spec, map[string]any{"version": "1.4.0", "timeoutSeconds": int64(600)})
	assert.Equal(t, out, again, "the same backup and target, the same spec")

	// the backup is from before an earlier rollback, which left 601 in
	// place: the spec deployed before this upgrade had 601
	out, line = redeploySpec(spec, map[string]any{"version": "1.4.0", "timeoutSeconds": int64(601)})
	assert.Equal(t, int64(602), out["timeoutSeconds"])
	assert.Equal(t, "spec.timeoutSeconds 600 → 602", line)
}

func TestRedeploySpecWithoutATimeoutSetsTheHelmHistory(t *testing.T) {
	theirs := map[string]any{"comparePatches": []any{map[string]any{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
		"name": "longhorn", "jsonPointers": []any{"/metadata/annotations"}}}}
	spec := map[string]any{"chart": "app", "version": "1.0.0", "defaultNamespace": "demo-system", "diff": theirs}
	out, line := redeploySpec(spec, map[string]any{"version": "2.0.0"})
	assert.Equal(t, int64(2), out["maxHistory"], "Fleet's default written out: the same history kept")
	assert.Equal(t, "spec.maxHistory 0 → 2", line)
	assert.Equal(t, theirs, out["diff"], "diff is not part of Fleet's deploymentID: left as it is")
	_, hasTimeout := out["timeoutSeconds"]
	assert.False(t, hasTimeout, "Helm's wait stays off")
	_, inBackup := spec["maxHistory"]
	assert.False(t, inBackup, "the backup is not changed")

	// after an earlier rollback the spec deployed before this upgrade
	// carried 2 already: one more
	out, line = redeploySpec(spec, map[string]any{"version": "2.0.0", "maxHistory": int64(2)})
	assert.Equal(t, int64(3), out["maxHistory"])
	assert.Equal(t, "spec.maxHistory 0 → 3", line)

	// a history limit of the user's own: one more
	spec["maxHistory"] = int64(10)
	out, _ = redeploySpec(spec, nil)
	assert.Equal(t, int64(11), out["maxHistory"])
}
