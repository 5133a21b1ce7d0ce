package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

func driftCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "drift",
		Usage: "list the live fields of a target's objects that differ from what its deployed revision rendered, in values terms",
		Description: "Read-only. For each field another manager changed or owns: the manager, the live and rendered\n" +
			"values, the value path(s) that render it (or why none does), and the adopt rule and --set that keep\n" +
			"the live value across an upgrade. A Secret's values are redacted. Exit 0 with or without drift.",
		Flags: flags([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Usage: "`KIND/NAMESPACE/NAME`, KIND one of " + kind.Or(targets.Kinds().Names())},
			&dirFlag{ucli.StringFlag{Name: "chart-source", Usage: "a `DIR` of charts, a Helm repository URL or an oci:// registry holding the deployed version (default: the chart the target holds)"}},
			&ucli.StringFlag{TakesFile: true, Name: "spec", Usage: "an upgrade spec `FILE` whose chart for the target gives the chart source and name the flags do not"},
			&ucli.StringFlag{Name: "chart-name", Usage: "the chart `NAME` in the source (default: the chart the target deploys)"},
			&ucli.StringFlag{TakesFile: true, Name: "ca-file", Usage: "extra CA certificates `FILE` for Helm repository URLs"},
			newOutputFlag("table", "json", "yaml"),
		}, localFlags()),
		Action: func(c *ucli.Context) error {
			out, err := app.Drift(c.Context, app.DriftOptions{Target: c.String("target"), ChartSource: c.String("chart-source"),
				Spec: c.String("spec"), ChartName: c.String("chart-name"), CAFile: c.String("ca-file"), Kubeconfig: c.String("kubeconfig"), Log: local(c).Log})
			if err != nil {
				return err
			}
			if f := c.String("output"); f != "table" {
				return app.WriteObject(c.App.Writer, f, out)
			}
			return out.WriteTable(c.App.Writer)
		},
	}
}
