package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

// planCharts returns the charts to upgrade: those of --spec, or the one
// --target with --chart-source and --policy, or, under
// system-upgrade-controller, those of the spec in the Plan's secret (then
// opts.SpecFile is set to it). It returns the spec file read, if any.
func planCharts(opts *Options) ([]spec.Chart, string, error) {
	switch {
	case opts.SpecFile != "" && opts.Target != "":
		return nil, "", outcome.BadInput(errors.New("give --spec or --target, not both"))
	case opts.SpecFile != "":
		if opts.PolicyFile != "" || !opts.Explicit.Empty() || opts.ChartSource != "" || opts.targetCRDs() {
			return nil, "", outcome.BadInput(errors.New("--policy, -f, the --set flags, --chart-source and --crds go with --target; with --spec, put rules in the spec (and apply.crds)"))
		}
		sp, err := spec.LoadSpec(opts.SpecFile, targets.Kinds())
		if err != nil {
			return nil, "", fmt.Errorf("--spec: %w", err)
		}
		return sp.Charts, opts.SpecFile, nil
	case opts.Target != "":
		kinds := targets.Kinds()
		t, err := spec.ParseTarget(opts.Target, kinds)
		if err != nil {
			return nil, "", outcome.BadInput(fmt.Errorf("--target: %w", err))
		}
		k, _ := kinds.Lookup(t.Kind)
		if opts.ChartSource == "" && !k.OwnSource {
			var own []string
			for _, d := range kinds {
				if d.OwnSource {
					own = append(own, d.Spelling)
				}
			}
			return nil, "", outcome.BadInput(fmt.Errorf("--chart-source is required with --target %s (only a %s may name its own)", opts.Target, kind.Or(own)))
		}
		c := spec.Chart{Target: t, Chart: spec.ChartRef{Name: opts.ChartName, Source: opts.ChartSource},
			Wait:  spec.Wait{Timeout: spec.DefaultWaitTimeout, FailureGrace: spec.DefaultFailureGrace, PodFailureGrace: spec.DefaultPodFailureGrace, Settle: spec.DefaultSettle},
			Apply: kind.DefaultApply, Images: spec.DefaultImages}
		if k.Options != nil {
			c.Options = k.Options.Default()
		}
		if c.Apply.CRDs, c.Apply.MigrateCRDs, err = targetCRDs(opts); err != nil {
			return nil, "", err
		}
		if opts.PolicyFile != "" {
			p, err := spec.LoadPolicy(opts.PolicyFile)
			if err != nil {
				return nil, "", fmt.Errorf("--policy: %w", err)
			}
			c.Rules, c.Migrations = p.Rules, p.Migrations
		}
		return []spec.Chart{c}, "", nil
	default:
		// under system-upgrade-controller: the spec in the Plan's secret
		if !opts.Explicit.Empty() || opts.PolicyFile != "" || opts.ChartSource != "" || opts.targetCRDs() {
			return nil, "", outcome.BadInput(errors.New("--policy, -f, the --set flags, --chart-source and --crds need --target"))
		}
		path, err := host.DiscoverSpec(opts.SecretsDir)
		if err != nil {
			return nil, "", err
		}
		opts.Log.Info("upgrade spec from the Plan's secret", "spec", path)
		opts.SpecFile = path
		charts, _, err := planCharts(opts)
		return charts, path, err
	}
}

// targetCRDs says whether --crds or --crds-migrate was given.
func (o *Options) targetCRDs() bool { return o.CRDsSet || o.CRDs != "" || o.MigrateCRDs }

// targetCRDs is --target's apply.crds from --crds and --crds-migrate, as
// the spec reads apply.crds: a word of kind.CRDPolicies (skip is ""), and
// migrate only with createReplace; else bad input naming the flag.
func targetCRDs(o *Options) (string, bool, error) {
	if !o.targetCRDs() {
		return "", false, nil
	}
	policy := o.CRDs
	if !slices.Contains(kind.CRDPolicies, policy) {
		return "", false, outcome.BadInput(fmt.Errorf("--crds: want %s, not %q", strings.Join(kind.CRDPolicies, ", "), policy))
	}
	if o.MigrateCRDs && policy != "createReplace" {
		return "", false, outcome.BadInput(fmt.Errorf("--crds-migrate needs --crds createReplace (a migration is part of replacing a CRD), not %q", policy))
	}
	if policy == kind.CRDPolicies[0] {
		return "", false, nil
	}
	return policy, o.MigrateCRDs, nil
}
