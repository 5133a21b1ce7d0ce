package cli

import (
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
)

func statusCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "status",
		Usage: "show a target's version, what chart-upgrader applied, its readiness, backups and the local journal",
		Flags: flags([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Usage: "`KIND/NAMESPACE/NAME`, KIND one of " + kind.Or(targets.Kinds().Names())},
			newOutputFlag("text", "json", "yaml"),
		}, localFlags()),
		Action: func(c *ucli.Context) error {
			return app.Status(c.Context, app.StatusOptions{Local: local(c), Target: c.String("target"), Format: c.String("output")})
		},
	}
}
