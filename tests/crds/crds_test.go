package crds_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/crds"
)

// sharedDir is where the project keeps the upstream CRDs: ../shared/crds
// next to the repository root (this package is tests/crds).
func sharedDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Join(wd, "..", "..", "..", "shared", "crds")
}

func TestUpstreamCopiesAreIdentical(t *testing.T) {
	dir := sharedDir(t)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no shared CRDs at %s: %v", dir, err)
	}
	for _, name := range crds.Upstream {
		want, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		got, err := crds.Files.ReadFile(name)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "%s differs from %s", name, dir)
	}
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
