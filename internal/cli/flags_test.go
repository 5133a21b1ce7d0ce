package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	ucli "github.com/urfave/cli/v2"
)

// Every flag declares what its value is where it is declared (a dirFlag,
// urfave's TakesFile), and its help agrees: a `DIR` placeholder is a
// dirFlag, a `FILE`, `PATH` or `CHART` one takes a file, any other a word.
// And every flag that takes a value is read from CHART_UPGRADER_<FLAG> too,
// whatever its type.
func TestFlagsDeclareTheirValueKind(t *testing.T) {
	want := map[string]string{"DIR": "dir", "FILE": "file", "PATH": "file", "CHART": "file"}
	var walk func(path string, cmds []*ucli.Command)
	n := 0
	walk = func(path string, cmds []*ucli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				d, ok := f.(ucli.DocGenerationFlag)
				if !ok || !d.TakesValue() {
					assert.Empty(t, valueKind(f), "%s %s takes no value", path+c.Name, f.Names()[0])
					continue
				}
				_, rest, _ := strings.Cut(d.GetUsage(), "`")
				placeholder, _, _ := strings.Cut(rest, "`")
				kind, ok := want[placeholder]
				if !ok {
					kind = "value"
				}
				assert.Equal(t, kind, valueKind(f), "%s --%s (placeholder %q)", path+c.Name, f.Names()[0], placeholder)
				if env, ok := f.(interface{ GetEnvVars() []string }); ok {
					assert.Contains(t, env.GetEnvVars(), envName(f.Names()[0]), "%s --%s is read from the environment too", path+c.Name, f.Names()[0])
				}
				n++
			}
			walk(path+c.Name+" ", c.Subcommands)
		}
	}
	walk("", newApp(io.Discard, io.Discard).Commands)
	assert.Greater(t, n, 50, "the flags of every command were walked")
}
