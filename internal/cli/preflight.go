package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
)

func preflightCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "preflight",
		Usage: "check that an upgrade may start (the same inputs as upgrade); makes no writes",
		Description: "Exit 0 when every check passes, 3 with one line per refusal.\n" +
			"-o table prints the decisions; -o diff also the change the apply makes to each object (live → after, a Secret's values redacted);\n" +
			"-o json prints one JSON object per chart: the decisions and the changes.",
		Flags: flags(targetFlags(), localFlags(), jobFlags(), []ucli.Flag{newOutputFlag("table", "diff", "json")}),
		Action: func(c *ucli.Context) error {
			opts, err := upgradeOptions(c)
			if err != nil {
				return err
			}
			opts.Output = c.String("output")
			return app.Preflight(c.Context, opts)
		},
	}
}
