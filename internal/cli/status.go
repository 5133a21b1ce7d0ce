package cli

import (
	"fmt"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func statusCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "status",
		Usage: "show a target's version, what chart-upgrader applied, its readiness, backups and the local journal",
		Flags: flags([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Usage: "`KIND/NAMESPACE/NAME`, KIND one of " + kind.Or(targets.Kinds().Names())},
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "`FORMAT`: text or json"},
		}, localFlags()),
		Action: func(c *ucli.Context) error {
			format := c.String("output")
			if format != "text" && format != "json" {
				return outcome.BadInput(fmt.Errorf("-o %q: want text or json", format))
			}
			return app.Status(c.Context, app.StatusOptions{Local: local(c), Target: c.String("target"), Format: format})
		},
	}
}
