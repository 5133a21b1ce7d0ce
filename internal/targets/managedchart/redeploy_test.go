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

func TestRedeploySpecWithoutATimeoutAddsAComparePatch(t *testing.T) {
	theirs := map[string]any{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "name": "longhorn",
		"jsonPointers": []any{"/metadata/annotations"}}
	spec := map[string]any{"chart": "app", "version": "1.0.0", "defaultNamespace": "demo-system",
		"diff": map[string]any{"comparePatches": []any{theirs}}}
	out, line := redeploySpec(spec, spec)
	patches := out["diff"].(map[string]any)["comparePatches"].([]any)
	assert.Equal(t, []any{theirs, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "demo-system",
		"name": "chart-upgrader-redeploy-1", "jsonPointers": []any{}}}, patches)
	assert.Contains(t, line, "demo-system/chart-upgrader-redeploy-1")
	assert.Len(t, spec["diff"].(map[string]any)["comparePatches"], 1, "the backup is not changed")
	_, hasTimeout := out["timeoutSeconds"]
	assert.False(t, hasTimeout, "Helm's wait stays off")

	// a backup taken after an earlier rollback: our entry is replaced by
	// the next one, theirs kept
	later, _ := redeploySpec(out, out)
	patches = later["diff"].(map[string]any)["comparePatches"].([]any)
	assert.Len(t, patches, 2)
	assert.Equal(t, "chart-upgrader-redeploy-2", patches[1].(map[string]any)["name"])

	// the backup from before an earlier rollback, whose entry the target
	// still carries: the next one
	later, _ = redeploySpec(spec, out)
	assert.Equal(t, "chart-upgrader-redeploy-2", later["diff"].(map[string]any)["comparePatches"].([]any)[1].(map[string]any)["name"])

	// no diff at all, no namespace
	out, _ = redeploySpec(map[string]any{"chart": "app", "version": "1.0.0"}, nil)
	assert.Equal(t, "default", out["diff"].(map[string]any)["comparePatches"].([]any)[0].(map[string]any)["namespace"])
}
