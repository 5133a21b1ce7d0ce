package values_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

const harvesterDir = "testdata/harvester"

// harvesterSHA256 pins the upstream copies in testdata/harvester (see its
// README): the default values of the harvester chart at two releases, byte
// for byte. A hand edit would make the benchmarks and golden tests measure
// values no release has.
var harvesterSHA256 = map[string]string{
	"values-v1.3.2.yaml": "a011dffc01dbf600f72fd3914b7b3b7fbac7bcd5d599baab811d879d9b52e9ef",
	"values-v1.4.3.yaml": "f3d6fc7807b338f09b85c2d08ec5e6f4ff1cf70bf9b011ccedae296a03e7a37f",
}

func TestHarvesterFixturesAreUnchanged(t *testing.T) {
	for name, want := range harvesterSHA256 {
		data, err := os.ReadFile(filepath.Join(harvesterDir, name))
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		assert.Equal(t, want, hex.EncodeToString(sum[:]), "%s is no longer the verbatim upstream copy", name)
	}
}

func readValues(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := values.Parse(b)
	require.NoError(t, err, path)
	return m
}

// harvesterInput is the v1.3.2 → v1.4.3 upgrade of the harvester chart
// installed by the installer and then edited by an operator, with a
// realistic policy.
func harvesterInput(t testing.TB) values.Input {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harvesterDir, "live.yaml"))
	require.NoError(t, err)
	live, err := values.ParseLive(b)
	require.NoError(t, err)
	rs := rules(t,
		"readonly:promote.**",
		"follow:**.image.tag",
		"max:**.resources",
		"keep:strategy",
	)
	rs = append(rs, liveRule(t, "storageClass.defaultStorageClass", "live", scRef, scExpr))
	return values.Input{
		User:        readValues(t, filepath.Join(harvesterDir, "user-values.yaml")),
		OldDefaults: readValues(t, filepath.Join(harvesterDir, "values-v1.3.2.yaml")),
		NewDefaults: readValues(t, filepath.Join(harvesterDir, "values-v1.4.3.yaml")),
		Rules:       rs,
		Migrations: []values.Migration{
			migration(t, "drop-kube-vip-config", "<1.1.0", "", `del(.kube-vip.config)`), // skipped: from 1.3.2
		},
		Live:        live,
		FromVersion: "v1.3.2",
		ToVersion:   "v1.4.3",
	}
}

func TestMergeHarvester(t *testing.T) {
	in := harvesterInput(t)
	res, err := values.Merge(in)
	require.NoError(t, err)
	u := res.Values
	get := func(path string) (any, bool) {
		t.Helper()
		p, err := values.ParsePattern(path)
		require.NoError(t, err)
		return lookupKeys(u, p.Keys())
	}
	has := func(path string, want any) {
		t.Helper()
		v, ok := get(path)
		if assert.True(t, ok, "%s must be in U'", path) {
			assert.Equal(t, want, v, path)
		}
	}
	absent := func(path string) {
		t.Helper()
		v, ok := get(path)
		assert.False(t, ok, "%s must not be in U' (got %v)", path, v)
	}

	// pinned tags equal to their v1.3.2 default are dropped: v1.4.3's apply
	absent("harvester-network-controller.image.tag")
	assert.Equal(t, values.ActionDrop, decisionAt(t, res, "harvester-network-controller.image.tag").Action)
	absent("kubevirt-operator")
	d := decisionAt(t, res, "kubevirt-operator.containers.operator.image.tag")
	assert.Equal(t, values.ActionDrop, d.Action)
	assert.Equal(t, set("1.3.1-150600.5.9.1"), d.New)

	// real customisations are kept
	has("harvester-node-disk-manager.image.tag", "v0.6.4-hotfix1")
	has("csi-snapshotter.image.tag", "v6.3.3-patched")
	has("csi-snapshotter.image.repository", "registry.example.com/sig-storage/snapshot-controller")
	has("containers.apiserver.resources.requests.memory", "1Gi") // ≥ 256Mi
	absent("containers.apiserver.resources.requests.cpu")        // 100m < 250m

	// promote values are kept as they are
	has("promote", map[string]any{
		"clusterPodCIDR": "10.52.0.0/16", "clusterServiceCIDR": "10.53.0.0/16", "clusterDNS": "10.53.0.10",
	})
	assert.Equal(t, values.PolicyReadonly, decisionAt(t, res, "promote.clusterDNS").Policy)

	// the installer's values are kept
	for path, want := range map[string]any{
		"service.vip.enabled":                                              true,
		"service.vip.mode":                                                 "static",
		"service.vip.ip":                                                   "192.168.122.100",
		"service.vip.hwAddress":                                            "",
		"storageClass.replicaCount":                                        int64(3),
		"kubevirt.spec.monitorAccount":                                     "rancher-monitoring-operator",
		"containers.apiserver.hciMode":                                     true,
		"containers.apiserver.image.imagePullPolicy":                       "IfNotPresent",
		"multus.enabled":                                                   false,
		"longhorn.defaultSettings.taintToleration":                         "kubevirt.io/drain:NoSchedule",
		"longhorn.defaultSettings.guaranteedInstanceManagerCPU":            int64(12),
		"longhorn.defaultSettings.storageReservedPercentageForDefaultDisk": "30",
		"harvester-network-controller.vipEnabled":                          true,
		"harvester-network-controller.image.pullPolicy":                    "IfNotPresent",
		"harvester-networkfs-manager.enabled":                              true,
		"harvester-node-disk-manager.labelFilter":                          []any{"COS_*", "HARV_*"},
		"rancherEmbedded":                                                  true,
		"kube-vip.enabled":                                                 true,
		"kube-vip-cloud-provider.enabled":                                  true,
	} {
		has(path, want)
	}

	// keep pins the v1.3.2 rollout strategy the new chart changes
	has("strategy", map[string]any{"rollingUpdate": map[string]any{"maxSurge": int64(2), "maxUnavailable": int64(2)}})
	// the live StorageClass says harvester-longhorn is no longer the default
	has("storageClass.defaultStorageClass", false)

	// nothing else: every leaf of U' comes from U or is pinned or live
	for _, keys := range leafPaths(u) {
		if _, ok := lookupKeys(in.User, keys); ok {
			continue
		}
		a := decisionAt(t, res, values.FormatPath(keys)).Action
		assert.Contains(t, []values.Action{values.ActionPin, values.ActionSet}, a, values.FormatPath(keys))
	}

	// the warnings
	assert.Equal(t, []string{"shadowed-default harvester-node-disk-manager.image.tag"},
		pathsOf(warningsOf(res, values.WarnShadowedDefault), "shadowed-default"))
	assert.Equal(t, []string{"pinned strategy.rollingUpdate.maxSurge", "pinned strategy.rollingUpdate.maxUnavailable"},
		pathsOf(warningsOf(res, values.WarnPinned), "pinned"))
	// the fixtures hold the parent chart's values only (no subcharts), so the
	// subchart keys the installer sets are orphans here
	assert.Equal(t, []string{
		"orphan harvester-network-controller.vipEnabled",
		"orphan harvester-node-disk-manager.labelFilter",
		"orphan kube-vip-cloud-provider",
		"orphan kubevirt.spec.monitorAccount",
		"orphan kubevirt.spec.monitorNamespace",
		"orphan longhorn.defaultSettings.defaultDataPath",
		"orphan longhorn.defaultSettings.detachManuallyAttachedVolumesWhenCordoned",
		"orphan longhorn.defaultSettings.guaranteedInstanceManagerCPU",
		"orphan longhorn.defaultSettings.nodeDrainPolicy",
		"orphan longhorn.defaultSettings.storageReservedPercentageForDefaultDisk",
		"orphan longhorn.defaultSettings.taintToleration",
		"orphan multus",
		"orphan promote",
	}, pathsOf(warningsOf(res, values.WarnOrphan), "orphan"))
	assert.Empty(t, warningsOf(res, values.WarnNoOldChart))
	assert.Empty(t, warningsOf(res, values.WarnLiveMissing))

	// decisions cover the changed defaults, e.g. a new subchart image
	d = decisionAt(t, res, "harvester-networkfs-manager.image.tag")
	assert.Equal(t, unset, d.Old)
	assert.Equal(t, set("v0.1.2"), d.New)
	// and not the unchanged ones without a user value
	assert.False(t, hasDecision(res, "longhorn.csi.kubeletRootDir"))

	// same input, same bytes
	again := mustMerge(t, harvesterInput(t))
	assert.Equal(t, string(res.YAML), string(again.YAML))
	assert.Equal(t, res.SHA256, again.SHA256)
}

func TestMergeHarvesterOverrides(t *testing.T) {
	t.Run("--set on a promote value refuses", func(t *testing.T) {
		in := harvesterInput(t)
		in.Overrides = []values.Override{{Origin: "--set promote.clusterDNS=10.53.0.11",
			Values: vals(t, `{promote: {clusterDNS: 10.53.0.11}}`)}}
		res, err := values.Merge(in)
		require.Error(t, err)
		assert.ErrorIs(t, err, outcome.ErrRefused)
		assert.Contains(t, err.Error(), "promote.clusterDNS")
		require.NotNil(t, res)
	})
	t.Run("--set of the same promote value and a new image tag", func(t *testing.T) {
		in := harvesterInput(t)
		in.Overrides = []values.Override{
			{Origin: "--set promote.clusterDNS=10.53.0.10", Values: vals(t, `{promote: {clusterDNS: 10.53.0.10}}`)},
			{Origin: "--set harvester-node-disk-manager.image.tag=v0.7.11", Values: vals(t, `{harvester-node-disk-manager: {image: {tag: v0.7.11}}}`)},
		}
		res := mustMerge(t, in)
		v, _ := lookupKeys(res.Values, []string{"harvester-node-disk-manager", "image", "tag"})
		assert.Equal(t, "v0.7.11", v)
		assert.Empty(t, warningsOf(res, values.WarnShadowedDefault))
	})
}

func pathsOf(ws []values.Warning, kind string) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, kind+" "+w.Path)
	}
	return out
}
