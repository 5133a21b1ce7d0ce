package helmchart

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Descriptor describes the helmchart kind to the rest of chart-upgrader.
// k3s and RKE2 label their server nodes
// node-role.kubernetes.io/control-plane=true: the Plan runs there.
var Descriptor = kind.Descriptor{
	Name:       Kind,
	Spelling:   "HelmChart",
	APIVersion: "helm.cattle.io/v1",
	Summary:    "a k3s/RKE2 HelmChart, deployed by helm-controller",
	Example:    "helmchart/kube-system/traefik",
	OwnSource:  true,
	Options: &kind.Options{Field: "helmchart", Summary: "failurePolicy: abort (default), retry or keep",
		Default: func() any { return DefaultOptions }, Parse: parseOptions},
	Plan: kind.PlanDefaults{Dir: "plans/k3s/", Name: "chart-upgrader-helmchart", NodeSelector: "node-role.kubernetes.io/control-plane=true",
		SpecSecret: "chart-upgrader-helmchart-spec", ServiceAccount: "chart-upgrader-helmchart"},
}

// Open is the target port of HelmChart namespace/name; opts are its
// Options (nil: DefaultOptions); apply its apply settings (spec.serverSide
// and spec.forceConflicts, where the cluster's CRD has them).
func Open(c *cluster.Clients, namespace, name string, opts any, apply kind.Apply) upgrade.Target {
	t := New(&Client{Dynamic: c.Dynamic, Kube: c.Kube, Log: c.Log, RESTMapper: c.Mapper}, namespace, name, kind.OptionsOr(opts, DefaultOptions))
	t.apply = apply.OrDefault()
	return t
}

// DeployedRelease reads a HelmChart object (as listed) as the release it
// deploys through helm-controller: its namespace/name, the object, when
// it is next applied and the chart source it names.
func DeployedRelease(namespace, name string, obj map[string]any) (release string, d kind.Deployed, ok bool) {
	h, err := ParseHelmChart(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return "", d, false
	}
	return h.TargetNamespace + "/" + h.ReleaseName(), kind.Deployed{Object: Descriptor.Spelling + " " + namespace + "/" + name,
		When: "at helm-controller's next run of it (its Job's helm upgrade)", Repo: h.Repo, Chart: h.Chart}, true
}
