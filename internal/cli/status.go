package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/phase"
)

func statusCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "status",
		Usage: "show a target's version, what chart-upgrader applied, its readiness, backups and the local journal",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Usage: "`managedchart/NAMESPACE/NAME`"},
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "`FORMAT`: text or json"},
		}, clusterFlags()...),
		Action: func(c *ucli.Context) error {
			format := c.String("output")
			if format != "text" && format != "json" {
				return outcome.BadInput(fmt.Errorf("-o %q: want text or json", format))
			}
			return phase.Status(c.Context, options(c), format)
		},
	}
}
