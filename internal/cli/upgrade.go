package cli

import (
	"fmt"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/imagecheck"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func upgradeCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "upgrade",
		Usage: "upgrade charts: resolve → preflight → merge → apply → wait → verify",
		Description: "Safe to re-run: a run after success makes no writes and exits 0.\n" +
			"Exit codes: 0 done, 1 failure, 2 bad input, 3 refused, 4 timed out, 5 lock held.",
		Flags: flags(targetFlags(), localFlags(), jobFlags()),
		Action: func(c *ucli.Context) error {
			opts, err := upgradeOptions(c)
			if err != nil {
				return err
			}
			return app.Upgrade(c.Context, opts)
		},
	}
}

// upgradeOptions gathers the flags of upgrade and preflight.
func upgradeOptions(c *ucli.Context) (app.Options, error) {
	l := local(c)
	grace, err := offDuration(c, "pod-failure-grace", "2m or 30s")
	if err != nil {
		return app.Options{}, err
	}
	settle, err := offDuration(c, "settle", "10s or 1m")
	if err != nil {
		return app.Options{}, err
	}
	manifests := c.String("image-manifests")
	if manifests != imagecheck.ManifestsGet && manifests != imagecheck.ManifestsHead {
		return app.Options{}, outcome.BadInput(fmt.Errorf("%s: --image-manifests %q: want %s or %s", commandPath(c), manifests, imagecheck.ManifestsGet, imagecheck.ManifestsHead))
	}
	return app.Options{PodFailureGrace: grace, Settle: settle,
		SpecFile: c.String("spec"), Target: c.String("target"), ChartSource: c.String("chart-source"),
		ChartName: c.String("chart-name"), PolicyFile: c.String("policy"),
		CRDs: c.String("crds"), CRDsSet: c.IsSet("crds"), MigrateCRDs: c.Bool("crds-migrate"),
		Explicit: explicit(c),
		Version:  c.String("version"), Timeout: c.Duration("timeout"),
		AllowDowngrade: c.Bool("allow-downgrade"), Unpause: c.Bool("unpause"), RequireNodesReady: c.Bool("require-nodes-ready"),
		Kubeconfig: l.Kubeconfig, HostRoot: l.HostRoot, StateDir: l.StateDir, LockFile: l.LockFile,
		TerminationLog: l.TerminationLog, NodeName: c.String("node-name"),
		LeaseDuration: c.Duration("lease-duration"), CAFile: c.String("ca-file"), SecretsDir: c.String("secrets-dir"),
		RegistriesConfig: c.String("registries-config"), SkipImageCheck: c.Bool("skip-image-check"), ImageTimeout: c.Duration("image-timeout"),
		ImageHeadsFirst: manifests == imagecheck.ManifestsHead,
		HooksDir:        c.String("hooks-dir"), HookTimeout: c.Duration("hook-timeout"),
		SUC: sucInfo(c), Log: l.Log, Out: l.Out,
	}, nil
}

// offDuration is a duration flag that 0 turns off (--pod-failure-grace,
// --settle): nil when not given; 0 or a positive duration, else bad
// input.
func offDuration(c *ucli.Context, flag, example string) (*time.Duration, error) {
	if !c.IsSet(flag) {
		return nil, nil
	}
	s := c.String(flag)
	if s == "0" {
		s = "0s"
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return nil, outcome.BadInput(fmt.Errorf("%s: --%s %q: want a positive duration such as %s, or 0 (off)", commandPath(c), flag, s, example))
	}
	return &d, nil
}
