package cli

import (
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func mergeCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "merge",
		Usage: "decide the new user values of a chart upgrade and report every decision",
		Description: "Offline: U from --values, the defaults from --chart (and --old-chart).\n" +
			"Cluster mode (--target): U from the target (" + kindSummaries() + "), the old\n" +
			"defaults from --chart-source (or the release) at the deployed version, live objects from the\ncluster; reads only.\n" +
			"-o yaml prints the new values on stdout and the report on stderr;\n" +
			"-o json prints one JSON object; -o table prints the report.",
		Flags: flags([]ucli.Flag{
			&ucli.StringFlag{TakesFile: true, Name: "values", Usage: "the current user values `FILE` (\"-\": standard input): what the target holds today, that the rules decide from. Unlike helm --values, not an override: overrides go in -f"},
			&ucli.StringFlag{TakesFile: true, Name: "chart", Usage: "new chart: a chart directory or .tgz `PATH`"},
			&ucli.StringFlag{TakesFile: true, Name: "old-chart", Usage: "deployed chart `PATH`, for the old defaults (follow, keep, readonly)"},
			&ucli.StringFlag{TakesFile: true, Name: "policy", Usage: "policy `FILE` with rules: and migrations:"},
			&ucli.StringFlag{TakesFile: true, Name: "live", Usage: "multi-document YAML `FILE` of objects for live and once rules"},
		}, explicitFlags(""), []ucli.Flag{
			&ucli.StringFlag{Name: "from-version", Usage: "deployed `VERSION` for migrations (default: the old chart's)"},
			&ucli.StringFlag{Name: "to-version", Usage: "target `VERSION` for migrations (default: the new chart's)"},
			newOutputFlag("yaml", "json", "table"),
			// cluster mode
			&ucli.StringFlag{Name: "target", Usage: "cluster mode: `KIND/NAMESPACE/NAME` instead of --values and --chart"},
			&dirFlag{ucli.StringFlag{Name: "chart-source", Usage: "cluster mode: a `DIR` of charts, a Helm repository URL or an oci:// registry"}},
			&ucli.StringFlag{Name: "chart-name", Usage: "cluster mode: the chart `NAME` in the source (default: the chart the target deploys)"},
			&ucli.StringFlag{Name: "version", Usage: "cluster mode: the `VERSION` to merge for (default: $SYSTEM_UPGRADE_PLAN_LATEST_VERSION)"},
			&ucli.StringFlag{TakesFile: true, Name: "ca-file", Usage: "cluster mode: extra CA certificates `FILE` for Helm repository URLs"},
		}, localFlags()),
		Action: func(c *ucli.Context) error {
			format := c.String("output")
			if c.String("target") != "" {
				return mergeTarget(c, format)
			}
			res, err := app.MergeOffline(c.Context, app.MergeFiles{
				Values: c.String("values"), Chart: c.String("chart"), OldChart: c.String("old-chart"),
				Policy: c.String("policy"), Live: c.String("live"),
				Explicit:    explicit(c),
				FromVersion: c.String("from-version"), ToVersion: c.String("to-version"),
			})
			if err != nil {
				return mergeFailed(c, res, err)
			}
			return writeResult(c.App.Writer, c.App.ErrWriter, format, res)
		},
	}
}

// mergeTarget is merge in cluster mode.
func mergeTarget(c *ucli.Context, format string) error {
	for _, offline := range []string{"values", "chart", "old-chart", "live", "from-version", "to-version"} {
		if c.String(offline) != "" {
			return outcome.BadInput(fmt.Errorf("--%s is for offline merges; with --target the cluster provides it", offline))
		}
	}
	res, err := app.MergeTarget(c.Context, app.MergeTargetOptions{
		Target: c.String("target"), ChartSource: c.String("chart-source"), ChartName: c.String("chart-name"),
		PolicyFile: c.String("policy"), Explicit: explicit(c),
		Version: c.String("version"), Kubeconfig: c.String("kubeconfig"), CAFile: c.String("ca-file"),
		Log: local(c).Log,
	})
	if err != nil {
		return mergeFailed(c, res, err)
	}
	return writeResult(c.App.Writer, c.App.ErrWriter, format, res)
}

// mergeFailed prints the decisions of a merge that ran but was refused
// (a readonly value changed, a chart that does not render) on stderr, and
// carries them for the failure object of -o json and yaml.
func mergeFailed(c *ucli.Context, res *values.Result, err error) error {
	if res == nil {
		return err
	}
	_ = res.WriteTable(c.App.ErrWriter)
	return &withReport{err: err, report: res.Redacted()}
}

// writeResult prints a merge result in the chosen format.
func writeResult(stdout, stderr io.Writer, format string, res *values.Result) error {
	switch format {
	case "json":
		return app.WriteObject(stdout, format, res.Redacted())
	case "table":
		return res.WriteTable(stdout)
	default:
		if err := res.WriteTable(stderr); err != nil {
			return err
		}
		_, err := stdout.Write(res.YAML)
		return err
	}
}
