package managedchart

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Descriptor describes the managedchart kind to the rest of
// chart-upgrader. It was the first kind: its Lease and its backups
// written before kinds were part of their names keep those names
// (Legacy).
var Descriptor = kind.Descriptor{
	Name:       Kind,
	Spelling:   "ManagedChart",
	APIVersion: "management.cattle.io/v3",
	Summary:    "a Rancher ManagedChart, deployed by Fleet",
	Example:    "managedchart/fleet-local/harvester",
	Plan: kind.PlanDefaults{Dir: "plans/", Name: "chart-upgrader", NodeSelector: "chart-upgrader.io/upgrade=true",
		SpecSecret: "chart-upgrader-spec", ServiceAccount: "chart-upgrader"},
	Legacy: true,
	Apply: kind.ApplySupport{
		ServerSideRefused:     "Fleet's agent decides how a ManagedChart's release is applied (v0.16: server-side on install, then what the release recorded); Fleet has no setting for it",
		ForceConflictsRefused: "Fleet v0.16 has no option to force field-manager conflicts; revert the other manager's change, or make it a value or a rule",
	},
}

// Open is the target port of ManagedChart namespace/name; it takes no
// options, and of the apply settings unchecked, recreate and crds
// (Descriptor.Apply refuses the others).
func Open(c *cluster.Clients, namespace, name string, _ any, apply kind.Apply) upgrade.Target {
	t := New(&Client{Dynamic: c.Dynamic, Kube: c.Kube, Log: c.Log, RESTMapper: c.Mapper}, namespace, name)
	t.apply = apply
	return t
}

// DeployedRelease reads a ManagedChart object (as listed) as the release
// Fleet deploys for it: its namespace/name, the object, when it is next
// applied.
func DeployedRelease(namespace, name string, obj map[string]any) (release string, d kind.Deployed, ok bool) {
	m, err := ParseManagedChart(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return "", d, false
	}
	return m.ReleaseNamespace() + "/" + m.Release(), kind.Deployed{Object: Descriptor.Spelling + " " + namespace + "/" + name,
		When: "at Fleet's next redeploy of it"}, true
}
