package cli

import (
	"fmt"
	"log/slog"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func preflightCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "preflight",
		Usage: "check that an upgrade may start (the same inputs as upgrade); makes no writes",
		Description: "Exit 0 when every check passes, 3 with one line per refusal.\n" +
			"--kube-version V instead checks every release on the cluster against Kubernetes V (exit 3 naming each that would break).\n" +
			"-o table prints the decisions; -o diff also the change the apply makes to each object (live → after, a Secret's values redacted);\n" +
			"-o json prints one JSON object per chart: the decisions and the changes.",
		Flags: flags(targetFlags(), localFlags(), jobFlags(), []ucli.Flag{newOutputFlag("table", "diff", "json")}, kubeVersionFlags()),
		Action: func(c *ucli.Context) error {
			if c.IsSet("kube-version") || c.IsSet("release-source") {
				return kubeVersionPreflight(c)
			}
			opts, err := upgradeOptions(c)
			if err != nil {
				return err
			}
			opts.Output = c.String("output")
			return app.Preflight(c.Context, opts)
		},
	}
}

// kubeVersionPreflight is preflight --kube-version: every release against
// the next Kubernetes version; the spec's flags do not apply.
func kubeVersionPreflight(c *ucli.Context) error {
	if !c.IsSet("kube-version") {
		return outcome.BadInput(fmt.Errorf("--release-source is for --kube-version"))
	}
	if c.IsSet("target") {
		return outcome.BadInput(fmt.Errorf("--kube-version checks every release on the cluster: drop --target (a --spec gives its charts' sources)"))
	}
	format := c.String("output")
	if format == "diff" {
		return outcome.BadInput(fmt.Errorf("-o diff is not for --kube-version (table or json)"))
	}
	rep, err := kubeVersionCheck(c, c.String("kubeconfig"), format, c.App.Writer)
	if err != nil {
		return err
	}
	host.WriteTermination(c.String("termination-log"), rep.Summary(), rep.Err(), slog.Default())
	if format == "json" {
		return writeJSONResult(c, rep, rep.Err())
	}
	return rep.Err()
}
