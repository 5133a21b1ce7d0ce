package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/targets"
)

// kindTable is reference.md's table of the target kinds, made from the
// kind registry.
func kindTable() string {
	var b strings.Builder
	b.WriteString("| kind | spec `target.kind` | object (Events) | what it is | chart source | spec options | Lease | backup Secret (for 1.0.0) | `plan --kind` defaults |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range targets.Kinds() {
		source := "`chart.source` (or `--chart-source`)"
		if k.OwnSource {
			source = "`chart.source`, or the one its object names"
		}
		options := "none"
		if k.Options != nil {
			options = fmt.Sprintf("`%s:` %s", k.Options.Field, k.Options.Summary)
		}
		object := "`" + k.APIVersion + "` " + k.Spelling
		backup := "`" + k.BackupName("NAME", "1.0.0") + "`"
		switch {
		case k.HistoryBackup:
			backup = "none: its Helm history"
		case k.Legacy:
			backup += " (also found: `" + k.LegacyBackupName("NAME", "1.0.0") + "`)"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s | %s | `%s` | %s | `%s`: %s, nodes `%s` |\n",
			k.Name, k.Spelling, object, k.Summary, source, options, k.LeaseName("NAME"), backup,
			k.Plan.Dir, k.Plan.Name, k.Plan.NodeSelector)
	}
	return b.String()
}

// The kind table of reference.md is the registry's: a kind added,
// removed or changed in internal/targets fails this until the table says
// so too.
func TestReferenceKindTableIsTheRegistrys(t *testing.T) {
	path := filepath.Join(root(t), "docs", "reference.md")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	const begin, end = "<!-- kinds:begin (generated from the registry; tests/docs checks it) -->\n", "<!-- kinds:end -->"
	text := string(data)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	require.True(t, i >= 0 && j > i, "docs/reference.md has no kinds:begin/kinds:end markers")
	got := text[i+len(begin) : j]
	want := kindTable()
	if os.Getenv("UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(text[:i+len(begin)]+want+text[j:]), 0o644))
		return
	}
	assert.Equal(t, want, got, "docs/reference.md's kind table differs from the registry; run UPDATE_DOCS=1 go test -run %s ./tests/docs/", t.Name())
}
