// Package targets is the registry of target kinds. Each kind is one
// adapter package behind the upgrade.Target port, which exports its
// kind.Descriptor and an Open function: one line here each. Everything
// outside the adapters that depends on the kind (the spec parser,
// `plan --kind`, the CLI's help, Events, Leases, backups, the docs' kind
// table) reads it from here.
package targets

import (
	"fmt"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/plainrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Opener opens the target port of one target of a kind; opts are the
// kind's options from the spec (kind.Options), nil for its defaults;
// apply is the entry's apply: block.
type Opener func(c *cluster.Clients, namespace, name string, opts any, apply kind.Apply) upgrade.Target

// entry is one registered kind.
type entry struct {
	kind.Descriptor
	open Opener
}

// registry lists the kinds, in the order help texts and docs name them.
var registry = []entry{
	{managedchart.Descriptor, managedchart.Open},
	{helmchart.Descriptor, helmchart.Open},
	{plainrelease.Descriptor, plainrelease.Open},
}

// Kinds are the registered kinds' descriptors.
func Kinds() kind.Set {
	out := make(kind.Set, len(registry))
	for i, e := range registry {
		out[i] = e.Descriptor
	}
	return out
}

// Lookup finds a kind by its name or spelling; an unknown one is bad input
// naming the known ones (what names the input: "--kind", a target).
func Lookup(what, name string) (kind.Descriptor, error) {
	ks := Kinds()
	if d, ok := ks.Lookup(name); ok {
		return d, nil
	}
	return kind.Descriptor{}, outcome.BadInput(fmt.Errorf("%s: unknown kind %q (want %s)", what, name, kind.Or(ks.Names())))
}

// Open returns the target port of ref, with its kind's options (nil: the
// kind's defaults) and apply settings. An unknown kind is bad input.
func Open(c *cluster.Clients, ref upgrade.Ref, opts any, apply kind.Apply) (upgrade.Target, error) {
	for _, e := range registry {
		if strings.EqualFold(e.Name, ref.Kind) {
			return e.open(c, ref.Namespace, ref.Name, opts, apply), nil
		}
	}
	_, err := Lookup("target "+ref.String(), ref.Kind)
	return nil, err
}
