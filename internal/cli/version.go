package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
)

// Commit is set at build time with -ldflags "-X ...cli.Commit=SHA" (make
// build); else the commit Go stamped into the binary, if any.
var Commit = ""

// buildInfo is what `version` prints.
type buildInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"goVersion"`
	Helm    string `json:"helmSDKVersion"`
}

func versionCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "version",
		Usage: "print chart-upgrader's version, commit, Go version and Helm SDK version",
		Flags: []ucli.Flag{
			newOutputFlag("text", "json", "yaml"),
		},
		Action: func(c *ucli.Context) error {
			info := buildInfo{Version: Version, Commit: Commit, Go: runtime.Version(), Helm: "unknown"}
			if info.Commit == "" {
				info.Commit = "unknown"
			}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && Commit == "" {
						info.Commit = s.Value
					}
				}
				for _, d := range bi.Deps {
					if d.Path == "helm.sh/helm/v4" {
						info.Helm = d.Version
					}
				}
			}
			if format := c.String("output"); format != "text" {
				return app.WriteObject(c.App.Writer, format, info)
			}
			_, err := fmt.Fprintf(c.App.Writer, "chart-upgrader %s (commit %s, %s, Helm SDK %s)\n", info.Version, info.Commit, info.Go, info.Helm)
			return err
		},
	}
}
