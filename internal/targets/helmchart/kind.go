package helmchart

import (
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
