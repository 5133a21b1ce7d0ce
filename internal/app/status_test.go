package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

const (
	appliedHash = "aaaaaaaaaaaa1111111111111111111111111111111111111111111111111111"
	nowHash     = "bbbbbbbbbbbb2222222222222222222222222222222222222222222222222222"
)

func TestWriteStatusOfAMissingTarget(t *testing.T) {
	var out bytes.Buffer
	writeStatus(&out, StatusReport{Target: "release/apps/web", Version: "ignored", Ready: true})
	assert.Equal(t, "release/apps/web: not found\n", out.String())
}

func TestWriteStatusOfAReadyTarget(t *testing.T) {
	var out bytes.Buffer
	writeStatus(&out, StatusReport{Target: "managedchart/fleet-local/harvester", Exists: true, Version: "1.4.0",
		Ready: true, Clusters: "3/3", Unit: "clusters"})
	assert.Equal(t, "managedchart/fleet-local/harvester: version 1.4.0, ready (clusters 3/3)\n", out.String())

	// paused by someone else
	out.Reset()
	writeStatus(&out, StatusReport{Target: "helmchart/kube-system/traefik", Exists: true, Version: "27.0.0",
		Ready: true, Clusters: "1/1", Unit: "resources", Paused: true})
	assert.Equal(t, "helmchart/kube-system/traefik: version 27.0.0, ready (resources 1/1), PAUSED\n", out.String())
}

func TestWriteStatusOfATargetMidUpgrade(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 5, 0, time.UTC)
	var out bytes.Buffer
	writeStatus(&out, StatusReport{
		Target: "release/apps/web", Exists: true, Version: "2.0.0", Paused: true, PausedByUs: true,
		AppliedVersion: "2.0.0", PreviousVersion: "1.0.0", AppliedAt: "2026-03-01T10:00:00Z", AppliedHash: appliedHash,
		ValuesHash: nowHash, ValuesChanged: true,
		Ready: false, Clusters: "1/2", Unit: "resources",
		Readiness: []string{"Deployment apps/web: InProgress: Available: 1/2"},
		NonReady:  []string{"Deployment apps/web", "Service apps/web"},
		Backups:   []string{"chart-upgrader-backup-release-web-1.0.0", "chart-upgrader-backup-release-web-0.9.0"},
		Journal: []upgrade.Entry{
			{FromVersion: "0.9.0", ToVersion: "1.0.0", Completed: true, UpdatedAt: at.Add(-24 * time.Hour),
				Phases: map[string]upgrade.Step{"verify": {}, "wait": {}, "apply": {}, "merge": {}, "preflight": {}, "resolve": {}}},
			{FromVersion: "1.0.0", ToVersion: "2.0.0", UpdatedAt: at,
				Phases: map[string]upgrade.Step{"apply": {}, "resolve": {}, "merge": {}, "preflight": {}},
				Gates: []health.Verdict{{Gate: "KubeVirt kubevirt.io/v1 (the release's)", State: health.InProgress, Objects: 1,
					Why: []string{"KubeVirt apps/kv: not current: status.phase == 'Deployed' is false (status.phase = \"Deploying\")"}}}},
		},
	})
	assert.Equal(t, strings.Join([]string{
		"release/apps/web: version 2.0.0, not ready (resources 1/2), PAUSED by chart-upgrader",
		"  applied by chart-upgrader: 2.0.0 (from 1.0.0) at 2026-03-01T10:00:00Z, values sha256 aaaaaaaaaaaa",
		"  values changed since (now sha256 bbbbbbbbbbbb)",
		"  waiting for: Deployment apps/web: InProgress: Available: 1/2",
		"  not ready: Deployment apps/web",
		"  not ready: Service apps/web",
		"  backups: chart-upgrader-backup-release-web-1.0.0, chart-upgrader-backup-release-web-0.9.0",
		"  journal: 0.9.0 → 1.0.0 completed (resolve,preflight,merge,apply,wait,verify) at 2026-02-28 10:00:05Z",
		"  journal: 1.0.0 → 2.0.0 in progress (resolve,preflight,merge,apply) at 2026-03-01 10:00:05Z",
		`    gate KubeVirt kubevirt.io/v1 (the release's): in progress, 0/1 current: KubeVirt apps/kv: not current: status.phase == 'Deployed' is false (status.phase = "Deploying")`,
		"",
	}, "\n"), out.String())
	// hashes are shortened for people; the full ones are in --format json
	assert.NotContains(t, out.String(), appliedHash)
}

func TestStatusReportJSONCarriesHashesNeverValues(t *testing.T) {
	full, err := json.Marshal(StatusReport{Target: "release/apps/web", Exists: true, Version: "2.0.0", Paused: true,
		PausedByUs: true, AppliedVersion: "2.0.0", AppliedHash: appliedHash, AppliedAt: "t", PreviousVersion: "1.0.0",
		ValuesHash: nowHash, ValuesChanged: true, Ready: true, Readiness: []string{"w"}, NonReady: []string{"n"},
		Clusters: "1/1", Unit: "resources", Backups: []string{"b"}, Journal: []upgrade.Entry{{Target: "release/apps/web"}}})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(full, &m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	assert.Equal(t, []string{"appliedAt", "appliedValuesSha256", "appliedVersion", "backups", "exists", "journal",
		"nonReady", "paused", "pausedByChartUpgrader", "previousVersion", "ready", "readyClusters", "target", "unit",
		"valuesChangedSinceApply", "valuesSha256", "version", "waitingFor"}, keys)
	assert.Equal(t, appliedHash, m["appliedValuesSha256"], "the full hash")

	// a missing target: what is not known is left out, the booleans stay
	empty, err := json.Marshal(StatusReport{Target: "release/apps/web"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"target":"release/apps/web","exists":false,"paused":false,"pausedByChartUpgrader":false,
		"valuesChangedSinceApply":false,"ready":false}`, string(empty))
}

func TestStatusRefusesABadTargetBeforeConnecting(t *testing.T) {
	var out bytes.Buffer
	k := targets.Kinds()[0].Name
	for _, target := range []string{"", "web", k + "/apps", "nosuchkind/apps/web", k + "/Apps/web", k + "/apps/web/x"} {
		err := Status(context.Background(), StatusOptions{Target: target,
			Local: Local{Kubeconfig: filepath.Join(t.TempDir(), "never-read"), Out: &out}})
		require.Error(t, err, target)
		assert.ErrorIs(t, err, outcome.ErrBadInput, target)
		assert.True(t, strings.HasPrefix(err.Error(), "--target: "), err.Error())
	}
	assert.Empty(t, out.String(), "nothing printed")
}

func TestRollbackRefusesBadInputAndSaysSoInTheTerminationLog(t *testing.T) {
	term := filepath.Join(t.TempDir(), "termination-log")
	err := Rollback(context.Background(), RollbackOptions{Local: Local{TerminationLog: term}})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Equal(t, "rollback needs --target KIND/NAMESPACE/NAME", err.Error())
	data, rerr := os.ReadFile(term)
	require.NoError(t, rerr)
	assert.Equal(t, "exit 2: rollback needs --target KIND/NAMESPACE/NAME\n", string(data))

	err = Rollback(context.Background(), RollbackOptions{Local: Local{TerminationLog: term}, Target: "nosuchkind/apps/web"})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	data, rerr = os.ReadFile(term)
	require.NoError(t, rerr)
	assert.True(t, strings.HasPrefix(string(data), "exit 2: --target: "), string(data))
}
