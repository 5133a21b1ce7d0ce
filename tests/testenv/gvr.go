package testenv

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resources of the installed CRDs.
var (
	ManagedChartsGVR     = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "managedcharts"}
	BundlesGVR           = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundles"}
	BundleDeploymentsGVR = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundledeployments"}
	PlansGVR             = schema.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"}
)

var listOne = metav1.ListOptions{Limit: 1}
