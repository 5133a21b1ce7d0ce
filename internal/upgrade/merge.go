package upgrade

import (
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// MergeInputs are the inputs of a merge, however they were gathered: from
// files (offline merge) or from a target and the cluster.
type MergeInputs struct {
	User       map[string]any // U
	New        *Chart         // the chart to upgrade to (Dnew)
	Old        *Chart         // the deployed chart (Dold); nil when unknown
	Rules      []values.Rule
	Migrations []values.Migration
	Live       values.LiveObjects
	Overrides  []values.Override
	// FromVersion and ToVersion are what migrations match on; "" → the
	// versions of Old and New.
	FromVersion, ToVersion string
	// Overlay is laid over the merged values when the chart is checked,
	// as the target's controller lays it (Observed.Overlay); every value
	// it shadows is reported, naming OverlayFrom.
	Overlay     map[string]any
	OverlayFrom string
	// Adopt are the live values adopt rules may take (DriftReport.Adoptions).
	Adopt []values.Adoption
}

// Merge is the one path from merge inputs to new values, shared by the
// offline merge, merge --target, preflight and upgrade: it decides every
// value (values.Merge), never leaves the values empty when the user had
// some (see nonEmpty), and checks that the new chart validates and renders
// with the result. A readonly violation, or a chart that does not validate
// or render, wraps outcome.ErrRefused; the Result is then returned too, for
// the report, and is never applied.
func Merge(in MergeInputs) (*values.Result, error) {
	vin := values.Input{User: in.User, NewDefaults: in.New.Defaults, NewKeys: in.New.Keys, Rules: in.Rules, Migrations: in.Migrations,
		Live: in.Live, Overrides: in.Overrides, FromVersion: in.FromVersion, ToVersion: in.ToVersion,
		RegeneratedData: in.New.RegeneratedData, Adopt: in.Adopt}
	if in.Old != nil {
		vin.OldDefaults = in.Old.Defaults
		if vin.FromVersion == "" {
			vin.FromVersion = in.Old.Version
		}
	}
	if vin.ToVersion == "" {
		vin.ToVersion = in.New.Version
	}
	res, err := values.Merge(vin)
	if err != nil {
		return res, err
	}
	if len(res.Values) == 0 && len(in.User) > 0 {
		if res, err = nonEmpty(res); err != nil {
			return nil, err
		}
	}
	checked := res.Values
	if len(in.Overlay) > 0 {
		res.Warnings = append(res.Warnings, values.Shadowed(res.Values, in.Overlay, in.OverlayFrom)...)
		checked = values.Overlay(res.Values, in.Overlay)
	}
	if err := in.New.Check(checked); err != nil {
		// schema and template errors may quote the values: never a secret
		err = values.Scrub(err, append(values.SecretStrings(res.Values), values.SecretStrings(in.Overlay)...))
		if isGlobalOnly(res.Values) {
			return res, fmt.Errorf("the merge leaves no user values, and Helm would then reuse the old ones; global: {} does not validate either: %w", err)
		}
		if len(in.Overlay) > 0 {
			return res, fmt.Errorf("chart %s %s with the merged values and %s over them: %w", in.New.Name, in.New.Version, in.OverlayFrom, err)
		}
		return res, fmt.Errorf("chart %s %s with the merged values: %w", in.New.Name, in.New.Version, err)
	}
	return res, nil
}

// nonEmpty writes `global: {}` instead of empty values. Helm, as Fleet and
// helm-controller run it (no reuse or reset flag), copies the previous
// release's values when the new ones are empty: the pins the merge dropped
// would all come back. An empty global map renders like nothing (Helm adds
// it anyway), and is not empty.
func nonEmpty(res *values.Result) (*values.Result, error) {
	out := *res
	out.Values = map[string]any{"global": map[string]any{}}
	var err error
	if out.YAML, err = values.Marshal(out.Values); err != nil {
		return nil, err
	}
	if out.SHA256, err = values.Hash(out.Values); err != nil {
		return nil, err
	}
	out.Warnings = append(append([]values.Warning(nil), res.Warnings...), values.Warning{Kind: values.WarnPinned, Path: "global",
		Message: "the merge leaves no user values: writing global: {} instead, since Helm (as Fleet runs it) reuses the previous values when given none"})
	return &out, nil
}

func isGlobalOnly(v map[string]any) bool {
	g, ok := v["global"].(map[string]any)
	return ok && len(v) == 1 && len(g) == 0
}
