// Package targets is the registry of target kinds: each kind is one
// adapter package behind the upgrade.Target port, and one line here.
package targets

import (
	"fmt"
	"sort"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/release"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// kind is one registered target kind.
type kind struct {
	// apiVersion and objectKind of the target object, for Events.
	apiVersion, objectKind string
	open                   func(c *cluster.Clients, namespace, name string, o Options) upgrade.Target
}

// Options are the options of one target (the spec's): a kind reads those
// that concern it.
type Options struct {
	// RollbackOnFailure and HistoryMax: a Helm release target's.
	RollbackOnFailure bool
	HistoryMax        int
}

// kinds is the registry, by the lower-case name of --target.
var kinds = map[string]kind{
	managedchart.Kind: {"management.cattle.io/v3", "ManagedChart", func(c *cluster.Clients, ns, name string, _ Options) upgrade.Target {
		return managedchart.New(&managedchart.Client{Dynamic: c.Dynamic, Kube: c.Kube, Log: c.Log}, ns, name)
	}},
	helmchart.Kind: {"helm.cattle.io/v1", "HelmChart", func(c *cluster.Clients, ns, name string, _ Options) upgrade.Target {
		return helmchart.New(&helmchart.Client{Dynamic: c.Dynamic, Kube: c.Kube, Log: c.Log}, ns, name)
	}},
	release.Kind: {"helm.sh/v3", "Release", func(c *cluster.Clients, ns, name string, o Options) upgrade.Target {
		return release.New(release.NewClient(c), ns, name, release.Options{RollbackOnFailure: o.RollbackOnFailure, HistoryMax: o.HistoryMax})
	}},
}

// Open returns the target port of ref. An unknown kind is bad input.
func Open(c *cluster.Clients, ref upgrade.Ref, o Options) (upgrade.Target, error) {
	k, ok := kinds[strings.ToLower(ref.Kind)]
	if !ok {
		return nil, outcome.BadInput(fmt.Errorf("target %s: unknown kind %q (known: %s)", ref, ref.Kind, strings.Join(Kinds(), ", ")))
	}
	return k.open(c, ref.Namespace, ref.Name, o), nil
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// APIVersions maps each kind to the apiVersion and Kind of its object.
func APIVersions() map[string][2]string {
	out := map[string][2]string{}
	for name, k := range kinds {
		out[name] = [2]string{k.apiVersion, k.objectKind}
	}
	return out
}
