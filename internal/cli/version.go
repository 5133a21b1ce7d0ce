package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	ucli "github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
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
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "`FORMAT`: text, json or yaml"},
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
			var out []byte
			var err error
			switch c.String("output") {
			case "text":
				out = fmt.Appendf(nil, "chart-upgrader %s (commit %s, %s, Helm SDK %s)\n", info.Version, info.Commit, info.Go, info.Helm)
			case "json":
				out, err = json.MarshalIndent(info, "", "  ")
				out = append(out, '\n')
			case "yaml":
				out, err = yaml.Marshal(info)
			default:
				return outcome.BadInput(fmt.Errorf("version: -o %q: want text, json or yaml", c.String("output")))
			}
			if err != nil {
				return err
			}
			_, err = c.App.Writer.Write(out)
			return err
		},
	}
}
