package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/channel"
)

func resolveCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "resolve",
		Usage: "print the version a system-upgrade-controller channel URL, or a Helm repository, points to",
		Description: "--channel URL: the SUC contract (GET without following redirects; the version is the\n" +
			"last path element of the Location of a redirect, or of the URL on a 2xx; '+' becomes '-').\n" +
			"--repo URL --chart NAME: the highest version in the repository satisfying --constraint.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "channel", Usage: "SUC channel `URL`"},
			&ucli.StringFlag{Name: "repo", Usage: "Helm repository `URL` (or a directory of charts), with --chart"},
			&ucli.StringFlag{Name: "chart", Usage: "chart `NAME` in --repo"},
			&ucli.StringFlag{Name: "constraint", Usage: "semver `CONSTRAINT` for --repo, e.g. \">=1.4.0 <2.0.0\" (default: any)"},
			&ucli.BoolFlag{Name: "devel", Usage: "with --repo: let prereleases satisfy the constraint"},
			&ucli.BoolFlag{Name: "require-semver", Usage: "with --channel: refuse a version that is not semver"},
			&ucli.StringFlag{TakesFile: true, Name: "ca-file", Usage: "extra CA certificates `FILE` (TLS is always verified)"},
			&ucli.DurationFlag{Name: "timeout", Value: channel.DefaultTimeout, Usage: "give up after `DURATION`, retries included"},
			&ucli.StringFlag{Name: "cluster-id", Usage: "the cluster `ID` to send as X-SUC-Cluster-ID"},
			&ucli.StringFlag{Name: "current-version", Usage: "the `VERSION` to send as X-SUC-Latest-Version"},
			newOutputFlag("text", "json", "yaml"),
		},
		Action: func(c *ucli.Context) error {
			version, err := channel.ResolveQuery(c.Context, channel.Query{
				Channel: c.String("channel"), Repo: c.String("repo"), Chart: c.String("chart"),
				Constraint: c.String("constraint"), Devel: c.Bool("devel"),
			}, channel.Options{
				ClusterID: c.String("cluster-id"), CurrentVersion: c.String("current-version"),
				CAFile: c.String("ca-file"), RequireSemver: c.Bool("require-semver"), Timeout: c.Duration("timeout"),
			})
			if err != nil {
				return err
			}
			if format := c.String("output"); format != "text" {
				return app.WriteObject(c.App.Writer, format, resolved{Version: version, Channel: c.String("channel"),
					Repo: c.String("repo"), Chart: c.String("chart"), Constraint: c.String("constraint")})
			}
			_, err = fmt.Fprintln(c.App.Writer, version)
			return err
		},
	}
}

// resolved is what resolve prints with -o json or yaml: the version and the
// query that gave it.
type resolved struct {
	Version    string `json:"version"`
	Channel    string `json:"channel,omitempty"`
	Repo       string `json:"repo,omitempty"`
	Chart      string `json:"chart,omitempty"`
	Constraint string `json:"constraint,omitempty"`
}
