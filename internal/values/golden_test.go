package values_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/golden from the current output")

// goldenPolicy is policy.yaml of a golden scenario: the rules and
// migrations of a policy file (docs/design.md §6) plus the other inputs of a merge.
type goldenPolicy struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Rules []struct {
		Path   string            `json:"path"`
		Policy string            `json:"policy"`
		Source *values.ObjectRef `json:"source"`
		Expr   string            `json:"expr"`
	} `json:"rules"`
	Migrations []struct {
		Name string `json:"name"`
		From string `json:"from"`
		To   string `json:"to"`
		Expr string `json:"expr"`
	} `json:"migrations"`
	Overrides []struct {
		Origin string         `json:"origin"`
		Values map[string]any `json:"values"`
	} `json:"overrides"`
	RegeneratedData []string `json:"regeneratedData"`
}

// loadScenario reads a scenario directory: user.yaml, new.yaml and
// policy.yaml, and optionally old.yaml (absent: no old chart) and live.yaml.
func loadScenario(t testing.TB, dir string) values.Input {
	t.Helper()
	read := func(name string, required bool) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) && !required {
			return nil
		}
		require.NoError(t, err)
		return b
	}
	parse := func(name string) map[string]any {
		m, err := values.Parse(read(name, true))
		require.NoError(t, err, name)
		return m
	}
	var pol goldenPolicy
	require.NoError(t, yaml.UnmarshalStrict(read("policy.yaml", true), &pol), "policy.yaml")

	in := values.Input{
		User:            parse("user.yaml"),
		NewDefaults:     parse("new.yaml"),
		FromVersion:     pol.From,
		ToVersion:       pol.To,
		RegeneratedData: pol.RegeneratedData,
	}
	if read("old.yaml", false) != nil {
		in.OldDefaults = parse("old.yaml")
	}
	if b := read("live.yaml", false); b != nil {
		live, err := values.ParseLive(b)
		require.NoError(t, err, "live.yaml")
		in.Live = live
	}
	for i, r := range pol.Rules {
		p, err := values.ParsePattern(r.Path)
		require.NoError(t, err, "rule %d", i+1)
		policy, err := values.ParsePolicy(r.Policy)
		require.NoError(t, err, "rule %d", i+1)
		var e *values.Expr
		if r.Expr != "" {
			e, err = values.ParseExpr(r.Expr)
			require.NoError(t, err, "rule %d", i+1)
		}
		rule, err := values.NewRule(p, policy, r.Source, e)
		require.NoError(t, err, "rule %d", i+1)
		in.Rules = append(in.Rules, rule)
	}
	for i, m := range pol.Migrations {
		e, err := values.ParseExpr(m.Expr)
		require.NoError(t, err, "migration %d", i+1)
		mig, err := values.NewMigration(m.Name, m.From, m.To, e)
		require.NoError(t, err, "migration %d", i+1)
		in.Migrations = append(in.Migrations, mig)
	}
	for _, o := range pol.Overrides {
		in.Overrides = append(in.Overrides, values.Override{Origin: o.Origin, Values: o.Values})
	}
	return in
}

// TestGolden merges every scenario of testdata/golden and compares the JSON
// result, the table report and the refusal (error.txt, when the merge is
// refused) with the golden files. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(dirs), 6)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res, err := values.Merge(loadScenario(t, dir))
			var errText []byte
			if err != nil {
				errText = []byte(err.Error() + "\n")
			}
			require.NotNil(t, res, "merge: %v", err)
			checkGolden(t, filepath.Join(dir, "result.json"), resultJSON(t, res))
			checkGolden(t, filepath.Join(dir, "table.txt"), resultTable(t, res))
			checkGolden(t, filepath.Join(dir, "error.txt"), errText)
		})
	}
}

// checkGolden compares got with the file; nil got means the file must not
// exist. With -update it writes (or removes) the file instead.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if got == nil {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				require.NoError(t, err)
			}
			return
		}
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	if got == nil {
		assert.True(t, os.IsNotExist(err), "%s exists but the merge gave no such output", path)
		return
	}
	require.NoError(t, err, "missing golden file; run go test ./internal/values -run TestGolden -update")
	assert.Equal(t, string(want), string(got), "%s differs; run with -update if the change is intended", path)
}
