package suc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// KindDefaults are the defaults of `chart-upgrader plan --kind KIND`: the
// names the example manifests of that kind use in plans/, and the nodes
// that kind's clusters run it on.
type KindDefaults struct {
	Name, NodeSelector, SpecSecret, ServiceAccount string
}

// kindDefaults by the lower-case kind name of --target.
var kindDefaults = map[string]KindDefaults{
	// plans/: Harvester's ManagedCharts, nodes opted in by a label
	"managedchart": {Name: "chart-upgrader", NodeSelector: DefaultNodeSelector,
		SpecSecret: DefaultSpecSecret, ServiceAccount: DefaultServiceAccount},
	// plans/k3s/: k3s and RKE2 HelmCharts, run on the server nodes (k3s
	// and RKE2 label them node-role.kubernetes.io/control-plane=true)
	"helmchart": {Name: "chart-upgrader-helmchart", NodeSelector: "node-role.kubernetes.io/control-plane=true",
		SpecSecret: "chart-upgrader-helmchart-spec", ServiceAccount: "chart-upgrader-helmchart"},
	// plans/release/: plain Helm releases, nodes opted in by a label
	"release": {Name: "chart-upgrader-release", NodeSelector: DefaultNodeSelector,
		SpecSecret: "chart-upgrader-release-spec", ServiceAccount: "chart-upgrader-release"},
}

// DefaultsFor returns the plan defaults of kind; an unknown kind is bad
// input naming the known ones.
func DefaultsFor(kind string) (KindDefaults, error) {
	d, ok := kindDefaults[strings.ToLower(kind)]
	if !ok {
		known := make([]string, 0, len(kindDefaults))
		for k := range kindDefaults {
			known = append(known, k)
		}
		sort.Strings(known)
		return KindDefaults{}, outcome.BadInput(fmt.Errorf("--kind %q: unknown (want %s)", kind, strings.Join(known, " or ")))
	}
	return d, nil
}
