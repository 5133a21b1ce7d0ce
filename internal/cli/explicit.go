package cli

import (
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// explicitFlags are Helm's value flags: -f and the --set family, each
// applied after the rules, in Helm's order. when starts each usage ("with
// --target: " where only a target takes them).
func explicitFlags(when string) []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringSliceFlag{TakesFile: true, Name: "file", Aliases: []string{"f"}, Usage: when + "override values `FILE` (\"-\": standard input), as helm -f: applied after the rules, before the --set flags; repeatable"},
		&ucli.StringSliceFlag{Name: "set-json", Usage: when + "override `KEY=JSON` (or a whole JSON object), as helm --set-json; repeatable"},
		&ucli.StringSliceFlag{Name: "set", Usage: when + "override `KEY=VALUE` in Helm's --set syntax; repeatable"},
		&ucli.StringSliceFlag{Name: "set-string", Usage: when + "override `KEY=VALUE`, every value a string, as helm --set-string; repeatable"},
		&ucli.StringSliceFlag{Name: "set-file", Usage: when + "override `KEY=FILE`: the file's content as a string, as helm --set-file; repeatable"},
		&ucli.StringSliceFlag{Name: "set-literal", Usage: when + "override `KEY=VALUE`, the value taken as is (commas, dots, braces), as helm --set-literal; repeatable"},
	}
}

// explicit gathers the explicit values of the command line.
func explicit(c *ucli.Context) app.Explicit {
	return app.Explicit{
		Files: c.StringSlice("file"), JSON: c.StringSlice("set-json"), Set: c.StringSlice("set"),
		String: c.StringSlice("set-string"), File: c.StringSlice("set-file"), Literal: c.StringSlice("set-literal"),
	}
}

// stdinFlags are the flags that read a file, which "-" makes standard input.
var stdinFlags = []string{"values", "file", "policy", "live", "spec", "check-values", "config"}

// checkStdin refuses two inputs that both read standard input: the first
// would read it to its end and the second would get nothing.
func checkStdin(c *ucli.Context) error {
	var readers []string
	for _, name := range stdinFlags {
		if !hasFlag(c.Command, name) {
			continue
		}
		for _, v := range append(c.StringSlice(name), c.String(name)) {
			if v == yamlfile.StdinPath {
				readers = append(readers, "--"+name+" -")
			}
		}
	}
	if hasFlag(c.Command, "set-file") {
		for _, item := range c.StringSlice("set-file") {
			if _, file, ok := strings.Cut(item, "="); ok && strings.TrimSpace(file) == yamlfile.StdinPath {
				key, _, _ := strings.Cut(item, "=")
				readers = append(readers, "--set-file "+key+"=-")
			}
		}
	}
	if len(readers) > 1 {
		return outcome.BadInput(fmt.Errorf("%s: %s all read standard input; only one input can (give the others as files)", commandPath(c), strings.Join(readers, ", ")))
	}
	return nil
}

// hasFlag reports whether command c declares the flag name.
func hasFlag(c *ucli.Command, name string) bool {
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}
