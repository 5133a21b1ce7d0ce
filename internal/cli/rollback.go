package cli

import (
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
)

func rollbackCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "rollback",
		Usage: "restore a target from its backup, then wait until it is ready",
		Description: "Restores the target's backup Secret chart-upgrader-backup-<kind>-<name>-<version>\n" +
			"(a release: its Helm revision): the newest, or the one taken before the upgrade from\n" +
			"--version. Safe to re-run.",
		Flags: flags([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Usage: "`KIND/NAMESPACE/NAME` to roll back, KIND one of " + kind.Or(targets.Kinds().Names())},
			&ucli.StringFlag{Name: "version", Usage: "restore the backup taken when upgrading from `VERSION` (default: the newest)"},
			&ucli.DurationFlag{Name: "timeout", Value: 20 * time.Minute, Usage: "how long to wait for readiness (`DURATION`)"},
		}, localFlags(), jobFlags()),
		Action: func(c *ucli.Context) error {
			return app.Rollback(c.Context, app.RollbackOptions{Local: local(c), Target: c.String("target"),
				Version: c.String("version"), Timeout: c.Duration("timeout"), NodeName: c.String("node-name"),
				LeaseDuration: c.Duration("lease-duration"), SUC: sucInfo(c)})
		},
	}
}
