package phase

import (
	"context"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
)

// LatestVersionEnv is the version system-upgrade-controller resolved for
// the Plan.
const LatestVersionEnv = "SYSTEM_UPGRADE_PLAN_LATEST_VERSION"

// resolvePhase reads the target, picks the version to upgrade to (--version,
// else $SYSTEM_UPGRADE_PLAN_LATEST_VERSION), loads the new chart and the
// deployed one (for the old defaults) from the chart source, and works out
// the situation. It makes no writes.
type resolvePhase struct{}

func (resolvePhase) Name() string { return "resolve" }

func (resolvePhase) Run(ctx context.Context, s *State) error {
	t := s.Chart.Target
	mc, found, err := s.Env.Target.Get(ctx, t.Namespace, t.Name)
	if err != nil {
		return err
	}
	if !found {
		return outcome.Refused(fmt.Errorf("managedchart %s/%s not found: check the target namespace and name", t.Namespace, t.Name))
	}
	s.MC, s.From = mc, mc.Version
	if s.To == "" {
		s.To = s.Opts.Version
	}
	if s.To == "" {
		s.To = os.Getenv(LatestVersionEnv)
	}
	if s.To == "" {
		return outcome.BadInput(fmt.Errorf("no version to upgrade to: give --version (or run under system-upgrade-controller, which sets $%s)", LatestVersionEnv))
	}
	name := s.Chart.Chart.Name
	if name == "" {
		name = mc.Chart
	}
	if s.NewChart, err = loadVersion(ctx, s, name, &s.To); err != nil {
		return fmt.Errorf("loading chart %s %s from %s: %w", name, s.To, s.Source, err)
	}
	switch {
	case s.From == s.To:
		s.OldChart = s.NewChart
	case s.From != "":
		from := s.From
		if s.OldChart, err = loadVersion(ctx, s, name, &from); err != nil {
			s.Opts.Log.Warn("the deployed chart version is not in the chart source: no old defaults (follow acts as user, keep cannot pin)",
				"version", s.From, "source", s.Source.String(), "error", err.Error())
			s.OldChart = nil
		}
	}
	ready := false
	if want, ok := mc.AppliedWant(); ok && want.Version == s.To {
		b, bds, err := s.Env.Target.Look(ctx, mc)
		if err != nil {
			return err
		}
		ready = target.Evaluate(want, mc, b, bds).Ready
	}
	s.Situation = Assess(mc, s.To, ready)
	s.Opts.Log.Info("resolved", "target", s.Ref(), "from", s.From, "to", s.To, "situation", string(s.Situation))
	return nil
}

// loadVersion loads the chart at *version and sets *version to the chart's
// own version. The source also finds "1.2.3" for "v1.2.3"; and since
// system-upgrade-controller turns a "+" of a version into "-", a version
// that is not found is matched against the source's versions with "+" read
// as "-" (chart 1.2.3+rke2r1 for 1.2.3-rke2r1).
func loadVersion(ctx context.Context, s *State, name string, version *string) (*chart.Chart, error) {
	c, err := s.Source.Load(ctx, name, *version)
	if err != nil {
		versions, verr := s.Source.Versions(ctx, name)
		if verr != nil {
			return nil, err
		}
		want := strings.TrimPrefix(*version, "v")
		for _, v := range versions {
			if strings.Contains(v, "+") && strings.ReplaceAll(strings.TrimPrefix(v, "v"), "+", "-") == want {
				if c, err = s.Source.Load(ctx, name, v); err == nil {
					break
				}
			}
		}
		if c == nil {
			return nil, err
		}
	}
	*version = c.Metadata.Version
	return c, nil
}
