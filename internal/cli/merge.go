package cli

import (
	"encoding/json"
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/phase"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func mergeCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "merge",
		Usage: "decide the new user values of a chart upgrade and report every decision",
		Description: "Offline: U from --values, the defaults from --chart (and --old-chart).\n" +
			"-o yaml prints the new values on stdout and the report on stderr;\n" +
			"-o json prints one JSON object; -o table prints the report.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "values", Usage: "user values `FILE` (what the target says today)"},
			&ucli.StringFlag{Name: "chart", Usage: "new chart: a chart directory or .tgz `PATH`"},
			&ucli.StringFlag{Name: "old-chart", Usage: "deployed chart `PATH`, for the old defaults (follow, keep, readonly)"},
			&ucli.StringFlag{Name: "policy", Usage: "policy `FILE` with rules: and migrations:"},
			&ucli.StringFlag{Name: "live", Usage: "multi-document YAML `FILE` of objects for live and once rules"},
			&ucli.StringSliceFlag{Name: "set", Usage: "explicit value `PATH=VALUE` (Helm --set syntax), after the rules; repeatable"},
			&ucli.StringSliceFlag{Name: "file", Aliases: []string{"f"}, Usage: "explicit values `FILE`, after the rules and before --set; repeatable"},
			&ucli.StringFlag{Name: "from-version", Usage: "deployed `VERSION` for migrations (default: the old chart's)"},
			&ucli.StringFlag{Name: "to-version", Usage: "target `VERSION` for migrations (default: the new chart's)"},
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "yaml", Usage: "`FORMAT`: yaml, json or table"},
		},
		Action: func(c *ucli.Context) error {
			format := c.String("output")
			if format != "yaml" && format != "json" && format != "table" {
				return outcome.BadInput(fmt.Errorf("-o %q: want yaml, json or table", format))
			}
			res, err := phase.MergeOffline(c.Context, phase.MergeFiles{
				Values: c.String("values"), Chart: c.String("chart"), OldChart: c.String("old-chart"),
				Policy: c.String("policy"), Live: c.String("live"),
				Set: c.StringSlice("set"), Files: c.StringSlice("file"),
				FromVersion: c.String("from-version"), ToVersion: c.String("to-version"),
			})
			if err != nil {
				if res != nil {
					_ = res.WriteTable(c.App.ErrWriter)
				}
				return err
			}
			return writeResult(c.App.Writer, c.App.ErrWriter, format, res)
		},
	}
}

// writeResult prints a merge result in the chosen format.
func writeResult(stdout, stderr io.Writer, format string, res *values.Result) error {
	switch format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(res.Redacted())
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
