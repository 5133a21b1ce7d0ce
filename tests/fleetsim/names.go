package fleetsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Labels and annotations, as Fleet and Rancher set them.
const (
	LabelBundleName       = "fleet.cattle.io/bundle-name"
	LabelBundleNamespace  = "fleet.cattle.io/bundle-namespace"
	LabelCluster          = "fleet.cattle.io/cluster"
	LabelClusterNamespace = "fleet.cattle.io/cluster-namespace"
	LabelManaged          = "fleet.cattle.io/managed"

	annOwnerGVK       = "objectset.rio.cattle.io/owner-gvk"
	annOwnerName      = "objectset.rio.cattle.io/owner-name"
	annOwnerNamespace = "objectset.rio.cattle.io/owner-namespace"
	ownerGVK          = "management.cattle.io/v3, Kind=ManagedChart"
)

// LocalCluster is the simulated cluster where the chart is really installed.
const LocalCluster = "local"

// BundleName is the Bundle Rancher writes for a ManagedChart.
func BundleName(managedChart string) string { return "mcc-" + managedChart }

// managedChartOf is the inverse of BundleName.
func managedChartOf(bundle string) (string, bool) {
	return strings.CutPrefix(bundle, "mcc-")
}

// ClusterName names the i-th simulated cluster: "local", then sim-0001….
func ClusterName(i int) string {
	if i == 0 {
		return LocalCluster
	}
	return fmt.Sprintf("sim-%04d", i)
}

// clusterIndex is the inverse of ClusterName; -1 when name is not one.
func clusterIndex(name string) int {
	if name == LocalCluster {
		return 0
	}
	var i int
	if _, err := fmt.Sscanf(name, "sim-%04d", &i); err != nil || i <= 0 {
		return -1
	}
	return i
}

// ClusterNamespace is where the BundleDeployments of the Bundles in
// namespace ns live: Fleet's name for the local cluster of the fleet-local
// workspace, and a name of the same shape for any other namespace.
func ClusterNamespace(ns string) string {
	if ns == "fleet-local" {
		return "cluster-fleet-local-local-1a3d67d0a899"
	}
	sum := sha256.Sum256([]byte(ns))
	ws := ns
	if max := 63 - len("cluster--local-") - 12; len(ws) > max {
		ws = strings.TrimRight(ws[:max], "-")
	}
	return "cluster-" + ws + "-local-" + hex.EncodeToString(sum[:])[:12]
}

// BundleDeploymentName names the BundleDeployment of a bundle for a cluster.
// All simulated clusters share one namespace, so the cluster is in the name.
func BundleDeploymentName(bundle, cluster string) string { return bundle + "-" + cluster }

// deploymentIDs returns the staged deployment ID of bundle content:
// "s-" + sha256(chart, version, canonical values) + ":" + a short hash of
// the other options, the shape of Fleet's IDs. Equal content, equal ID.
func deploymentID(chart, version string, values any, options map[string]any) (string, error) {
	vals, err := json.Marshal(values) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("hashing the values of chart %s %s: %w", chart, version, err)
	}
	content := sha256.New()
	fmt.Fprintf(content, "%s\x00%s\x00", chart, version)
	content.Write(vals)
	opts, err := json.Marshal(options)
	if err != nil {
		return "", fmt.Errorf("hashing the options of chart %s %s: %w", chart, version, err)
	}
	optSum := sha256.Sum256(opts)
	return "s-" + hex.EncodeToString(content.Sum(nil)) + ":" + hex.EncodeToString(optSum[:])[:12], nil
}
