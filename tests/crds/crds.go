// Package crds embeds the CustomResourceDefinitions the end-to-end tests
// install: Fleet's Bundle and BundleDeployment, system-upgrade-controller's
// Plan and k3s helm-controller's HelmChart and HelmChartConfig (v0.17.9),
// copied verbatim from the upstream projects, and Rancher's
// ManagedChart, which Rancher registers at runtime and ships no file for, so
// it is written here (its status schema is Fleet's BundleStatus).
//
// The YAML files in this directory are the source of truth; Load decodes
// them, so a program using the test environment needs no checkout.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Files holds the CRD files, one CRD per file, named <plural>.<group>.
//
//go:embed *.yaml
var Files embed.FS

// Upstream lists the files copied verbatim from upstream; a test pins
// their sha256, so a hand edit is noticed.
var Upstream = []string{
	"fleet.cattle.io_bundledeployments.yaml",
	"fleet.cattle.io_bundles.yaml",
	"upgrade.cattle.io_plans.yaml",
	"helm.cattle.io_helmcharts.yaml",
	"helm.cattle.io_helmchartconfigs.yaml",
}

// Load decodes every embedded CRD, in file-name order.
func Load() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(Files, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing embedded CRDs: %w", err)
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := Files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded CRD %q: %w", name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding CRD %q: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
