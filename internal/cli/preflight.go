package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
)

func preflightCommand() *ucli.Command {
	return &ucli.Command{
		Name:        "preflight",
		Usage:       "check that an upgrade may start (the same inputs as upgrade); makes no writes",
		Description: "Exit 0 when every check passes, 3 with one line per refusal.",
		Flags:       flags(targetFlags(), localFlags(), jobFlags()),
		Action: func(c *ucli.Context) error {
			return app.Preflight(c.Context, upgradeOptions(c))
		},
	}
}
