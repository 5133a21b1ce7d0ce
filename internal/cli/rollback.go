package cli

import (
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/phase"
)

func rollbackCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "rollback",
		Usage: "restore a ManagedChart's spec from its backup Secret, then wait until it is ready",
		Description: "Restores chart-upgrader-backup-<name>-<version>: the newest backup, or the one\n" +
			"taken before the upgrade from --version. Safe to re-run.",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Usage: "`managedchart/NAMESPACE/NAME` to roll back"},
			&ucli.StringFlag{Name: "version", Usage: "restore the backup taken when upgrading from `VERSION` (default: the newest)"},
			&ucli.DurationFlag{Name: "timeout", Value: 20 * time.Minute, Usage: "how long to wait for readiness (`DURATION`)"},
		}, clusterFlags()...),
		Action: func(c *ucli.Context) error {
			if err := checkDurations(c); err != nil {
				return err
			}
			return phase.Rollback(c.Context, options(c))
		},
	}
}
