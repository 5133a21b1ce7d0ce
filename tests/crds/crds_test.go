package crds_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/crds"
)

// upstreamSHA256 pins the files copied verbatim from Fleet and
// system-upgrade-controller: this directory is their source of truth, and a
// copy edited by hand would make the tests check against CRDs no cluster
// has. To take a newer upstream version, copy the file unchanged and update
// its sum here.
var upstreamSHA256 = map[string]string{
	"fleet.cattle.io_bundledeployments.yaml": "8c280a402e0fbcbc99a2b77510f2710f2ec3a7a774ef393ebf1c40de9b18931b",
	"fleet.cattle.io_bundles.yaml":           "d6ddb62e118fc52ef974fe9233665be1d94547d6851c6c4461a7f7f83db136e6",
	"upgrade.cattle.io_plans.yaml":           "68a2e6b786dc3a3d47f0ac557b06833d2f773d801f482f43d37c7e819309c656",
	"helm.cattle.io_helmcharts.yaml":         "408d2d881628839c7c443eea8d42912ae56d967f835fe49f7f2e00738b4328f5",
	"helm.cattle.io_helmchartconfigs.yaml":   "492cbaebc4b3b9db5226c8784db82f442991b2ff399ed65f4f83c0f50160071d",
}

func TestUpstreamCopiesAreUnchanged(t *testing.T) {
	require.ElementsMatch(t, crds.Upstream, keys(upstreamSHA256), "crds.Upstream and the pinned sums list different files")
	for _, name := range crds.Upstream {
		data, err := crds.Files.ReadFile(name)
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		require.Equal(t, upstreamSHA256[name], hex.EncodeToString(sum[:]),
			"%s is no longer the verbatim upstream copy", name)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestLoad(t *testing.T) {
	all, err := crds.Load()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, crd := range all {
		names[crd.Name] = true
	}
	for _, want := range []string{
		"bundles.fleet.cattle.io",
		"bundledeployments.fleet.cattle.io",
		"plans.upgrade.cattle.io",
		"managedcharts.management.cattle.io",
	} {
		require.True(t, names[want], "missing CRD %s", want)
	}
}

func TestManagedChartCRD(t *testing.T) {
	all, err := crds.Load()
	require.NoError(t, err)
	var mc, bundle map[string]any
	for _, crd := range all {
		switch crd.Name {
		case "managedcharts.management.cattle.io":
			require.Equal(t, "management.cattle.io", crd.Spec.Group)
			require.Equal(t, "ManagedChart", crd.Spec.Names.Kind)
			require.Equal(t, "Namespaced", string(crd.Spec.Scope))
			require.Len(t, crd.Spec.Versions, 1)
			v := crd.Spec.Versions[0]
			require.Equal(t, "v3", v.Name)
			require.NotNil(t, v.Subresources)
			require.NotNil(t, v.Subresources.Status)
			props := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties
			for _, f := range []string{"paused", "chart", "repoName", "releaseName", "version",
				"timeoutSeconds", "values", "force", "takeOwnership", "maxHistory",
				"defaultNamespace", "namespace", "serviceAccount", "diff", "rolloutStrategy", "targets"} {
				require.Contains(t, props, f)
			}
			mc = toMap(t, v.Schema.OpenAPIV3Schema.Properties["status"].Properties)
		case "bundles.fleet.cattle.io":
			bundle = toMap(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties)
		}
	}
	require.Equal(t, bundle, mc, "ManagedChart status schema must be Fleet's BundleStatus")
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}
