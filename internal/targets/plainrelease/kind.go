package plainrelease

import (
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// Descriptor describes the release kind to the rest of chart-upgrader.
var Descriptor = kind.Descriptor{
	Name:          Kind,
	Spelling:      "Release",
	APIVersion:    "helm.sh/v3",
	Summary:       "a plain Helm release (Helm's Secrets storage)",
	Example:       "release/demo/app",
	HistoryBackup: true,
	Options: &kind.Options{Field: "release", Summary: "rollbackOnFailure (default true), historyMax (default 10), recoverPending: {after: DURATION} (default: never), mapRemovedAPIs (default false)",
		Default: func() any { return DefaultOptions }, Parse: parseOptions},
	Plan: kind.PlanDefaults{Dir: "plans/release/", Name: "chart-upgrader-release", NodeSelector: "chart-upgrader.io/upgrade=true",
		SpecSecret: "chart-upgrader-release-spec", ServiceAccount: "chart-upgrader-release"},
}

// DefaultOptions are the options of a spec entry that gives none.
var DefaultOptions = Options{RollbackOnFailure: true, HistoryMax: 10}

// Open is the target port of release namespace/name; opts are its
// Options (nil: DefaultOptions); apply how Helm applies it.
func Open(c *cluster.Clients, namespace, name string, opts any, apply kind.Apply) upgrade.Target {
	t := New(NewClient(c), namespace, name, kind.OptionsOr(opts, DefaultOptions))
	t.apply = apply.OrDefault()
	return t
}

// parseOptions reads release: {rollbackOnFailure, historyMax,
// recoverPending: {after}, mapRemovedAPIs}.
func parseOptions(file yamlfile.File, n *yaml.Node, field string) (any, error) {
	out := DefaultOptions
	f, err := file.Fields(n, field, "rollbackOnFailure", "historyMax", "recoverPending", "mapRemovedAPIs")
	if err != nil {
		return nil, err
	}
	if b := f.Get("rollbackOnFailure"); b != nil {
		if out.RollbackOnFailure, err = file.Bool(b, f.Path("rollbackOnFailure")); err != nil {
			return nil, err
		}
	}
	if b := f.Get("mapRemovedAPIs"); b != nil {
		if out.MapRemovedAPIs, err = file.Bool(b, f.Path("mapRemovedAPIs")); err != nil {
			return nil, err
		}
	}
	if h := f.Get("historyMax"); h != nil {
		var v int
		if h.Kind != yaml.ScalarNode || h.Tag != "!!int" || h.Decode(&v) != nil || v < 0 {
			return nil, file.Failf(h, f.Path("historyMax"), "want a whole number ≥ 0, not %s", yamlfile.Describe(h))
		}
		out.HistoryMax = v
	}
	if r := f.Get("recoverPending"); r != nil {
		rf, err := file.Fields(r, f.Path("recoverPending"), "after")
		if err != nil {
			return nil, err
		}
		a := rf.Get("after")
		if a == nil {
			return nil, file.Failf(r, f.Path("recoverPending"), "want after: DURATION, the age past which another process's pending revision is recovered")
		}
		if out.RecoverPendingAfter, err = file.Duration(a, rf.Path("after"), "1h or 30m"); err != nil {
			return nil, err
		}
	}
	return out, nil
}
