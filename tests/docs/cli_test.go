package docs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/cli"
)

// commands are the commands reference.md documents, each with the flags
// it shares with others and documents once, in another section.
var commands = []struct {
	path   string   // as typed
	shared []string // sections whose flags it also takes
}{
	{"merge", []string{"Cluster flags"}},
	{"upgrade", []string{"Cluster flags"}},
	{"preflight", []string{"Cluster flags", "preflight --kube-version"}},
	{"status", []string{"Cluster flags"}},
	{"drift", []string{"Cluster flags"}},
	{"rollback", []string{"Cluster flags"}},
	{"resolve", nil},
	{"channel serve", nil},
	{"plan", nil},
	{"version", nil},
	{"completion", nil},
	{"host prepare", nil},
	{"node cordon", nil},
	{"node drain", nil},
	{"node uncordon", nil},
	{"node preflight", nil},
}

var (
	helpFlag = regexp.MustCompile(`(?:^|, )(--?[a-z][a-z0-9-]*)`)
	docFlag  = regexp.MustCompile("(?:^|[\\s`\\[(|])(--?[a-z][a-z0-9-]*)")
)

// helpFlags are the flags `COMMAND --help` lists.
func helpFlags(t *testing.T, path string) []string {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), append(append([]string{"chart-upgrader"}, strings.Fields(path)...), "--help"), &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	help := out.String()
	i := strings.Index(help, "OPTIONS:")
	require.GreaterOrEqual(t, i, 0, "%s --help lists no OPTIONS:\n%s", path, help)
	var flags []string
	for _, line := range strings.Split(help[i:], "\n")[1:] {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "-") {
			continue
		}
		column, _, _ := strings.Cut(line, "  ") // the flag column, before its usage
		for _, m := range helpFlag.FindAllStringSubmatch(column, -1) {
			if m[1] != "--help" && m[1] != "-h" && !slices.Contains(flags, m[1]) {
				flags = append(flags, m[1])
			}
		}
	}
	if path != "completion" { // its one input is the shell
		require.NotEmpty(t, flags, "%s --help lists no flag: did the help format change?", path)
	}
	return flags
}

// section is the text of the reference.md section whose heading names
// title (a command in backquotes, or a plain title).
func section(t *testing.T, doc, title string) string {
	t.Helper()
	for _, s := range strings.Split(doc, "\n## ")[1:] {
		heading, _, _ := strings.Cut(s, "\n")
		if heading == title || strings.Contains(heading, "`"+title+"`") {
			return s
		}
	}
	t.Fatalf("reference.md has no section for %s", title)
	return ""
}

// synopsis is the first code block of a section.
func synopsis(s string) string {
	_, rest, ok := strings.Cut(s, "```\n")
	if !ok {
		return ""
	}
	block, _, _ := strings.Cut(rest, "```")
	return block
}

func flagsIn(text string) []string {
	var out []string
	for _, m := range docFlag.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// Each command's --help and its section of reference.md agree: every flag
// the binary takes is documented there (or in the section of the flags it
// shares), and every flag the section's synopsis names is one the binary
// takes.
func TestReferenceAndHelpAgree(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root(t), "docs", "reference.md"))
	require.NoError(t, err)
	doc := string(data)
	for _, c := range commands {
		t.Run(c.path, func(t *testing.T) {
			help := helpFlags(t, c.path)
			own := section(t, doc, c.path)
			documented := flagsIn(own)
			for _, s := range c.shared {
				documented = append(documented, flagsIn(section(t, doc, s))...)
			}
			for _, f := range help {
				assert.Contains(t, documented, f, "%s --help has %s; reference.md does not document it", c.path, f)
			}
			syn := synopsis(own)
			require.NotEmpty(t, syn, "the section of %s has no synopsis", c.path)
			mine := true
			for _, line := range strings.Split(syn, "\n") {
				// a combined section's synopsis names each of its commands
				// on a line of its own, continued on indented lines
				if cmd := strings.Fields(line); len(cmd) > 1 && cmd[0] == "chart-upgrader" {
					mine = strings.HasPrefix(strings.Join(cmd[1:], " "), c.path)
				}
				if !mine {
					continue
				}
				for _, f := range flagsIn(line) {
					assert.Contains(t, help, f, "reference.md's synopsis of %s names %s; --help does not have it", c.path, f)
				}
			}
		})
	}
}
