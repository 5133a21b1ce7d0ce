package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/phase"
)

func upgradeCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "upgrade",
		Usage: "upgrade ManagedCharts: resolve → preflight → merge → apply → wait → verify",
		Description: "Safe to re-run: a run after success makes no writes and exits 0.\n" +
			"Exit codes: 0 done, 1 failure, 2 bad input, 3 refused, 4 timed out, 5 lock held.",
		Flags: append(targetFlags(), clusterFlags()...),
		Action: func(c *ucli.Context) error {
			if err := checkDurations(c); err != nil {
				return err
			}
			return phase.Upgrade(c.Context, options(c))
		},
	}
}

func preflightCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "preflight",
		Usage:       "check that an upgrade may start (the same inputs as upgrade); makes no writes",
		Description: "Exit 0 when every check passes, 3 with one line per refusal.",
		Flags:       append(targetFlags(), clusterFlags()...),
		Action: func(c *ucli.Context) error {
			if err := checkDurations(c); err != nil {
				return err
			}
			return phase.Preflight(c.Context, options(c))
		},
	}
}
