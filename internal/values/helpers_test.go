package values_test

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// vals parses a values document written inline, usually in flow style
// (`{a: {b: 1}}`). An empty string is an empty map.
func vals(t testing.TB, doc string) map[string]any {
	t.Helper()
	m, err := values.Parse([]byte(doc))
	require.NoError(t, err, "test values %q", doc)
	return m
}

// rules builds rules from "policy:pattern" strings, in order.
func rules(t testing.TB, specs ...string) []values.Rule {
	t.Helper()
	out := make([]values.Rule, 0, len(specs))
	for _, s := range specs {
		policy, pattern, ok := strings.Cut(s, ":")
		require.True(t, ok, "rule %q: want policy:pattern", s)
		out = append(out, rule(t, pattern, policy))
	}
	return out
}

func rule(t testing.TB, pattern, policy string) values.Rule {
	t.Helper()
	p, err := values.ParsePattern(pattern)
	require.NoError(t, err, "pattern %q", pattern)
	pol, err := values.ParsePolicy(policy)
	require.NoError(t, err)
	r, err := values.NewRule(p, pol, nil, nil)
	require.NoError(t, err)
	return r
}

// liveRule builds a live or once rule reading expr from the object ref.
func liveRule(t testing.TB, pattern, policy string, ref values.ObjectRef, expr string) values.Rule {
	t.Helper()
	p, err := values.ParsePattern(pattern)
	require.NoError(t, err)
	pol, err := values.ParsePolicy(policy)
	require.NoError(t, err)
	e, err := values.ParseExpr(expr)
	require.NoError(t, err)
	r, err := values.NewRule(p, pol, &ref, e)
	require.NoError(t, err)
	return r
}

func migration(t testing.TB, name, from, to, expr string) values.Migration {
	t.Helper()
	e, err := values.ParseExpr(expr)
	require.NoError(t, err)
	m, err := values.NewMigration(name, from, to, e)
	require.NoError(t, err)
	return m
}

// mustMerge merges and fails the test on any error.
func mustMerge(t testing.TB, in values.Input) *values.Result {
	t.Helper()
	res, err := values.Merge(in)
	require.NoError(t, err)
	require.NotNil(t, res)
	return res
}

// decisionAt returns the decision of a path.
func decisionAt(t testing.TB, res *values.Result, path string) values.Decision {
	t.Helper()
	for _, d := range res.Decisions {
		if d.Path == path {
			return d
		}
	}
	require.Failf(t, "no decision", "no decision for %q; decided: %v", path, decisionPaths(res))
	return values.Decision{}
}

func hasDecision(res *values.Result, path string) bool {
	for _, d := range res.Decisions {
		if d.Path == path {
			return true
		}
	}
	return false
}

func decisionPaths(res *values.Result) []string {
	out := make([]string, len(res.Decisions))
	for i, d := range res.Decisions {
		out[i] = d.Path
	}
	return out
}

// warningList renders the warnings as "kind path", in result order.
func warningList(res *values.Result) []string {
	out := []string{}
	for _, w := range res.Warnings {
		out = append(out, string(w.Kind)+" "+w.Path)
	}
	return out
}

func warningsOf(res *values.Result, kind values.WarningKind) []values.Warning {
	var out []values.Warning
	for _, w := range res.Warnings {
		if w.Kind == kind {
			out = append(out, w)
		}
	}
	return out
}

// resultJSON encodes a result the way `merge -o json` prints it.
func resultJSON(t testing.TB, res *values.Result) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(res.Redacted()))
	return b.Bytes()
}

func resultTable(t testing.TB, res *values.Result) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, res.WriteTable(&b))
	return b.Bytes()
}

// set is a set value, for comparing with Decision fields.
func set(v any) values.Value { return values.Value{V: v, Set: true} }

// unset is the absence of a value.
var unset = values.Value{}

// leafPaths lists the paths of every leaf of a values tree (a non-map or an
// empty map), as key lists.
func leafPaths(m map[string]any) [][]string {
	var out [][]string
	var walk func(prefix []string, v any)
	walk = func(prefix []string, v any) {
		mm, ok := v.(map[string]any)
		if !ok || (len(mm) == 0 && len(prefix) > 0) {
			out = append(out, append([]string(nil), prefix...))
			return
		}
		keys := make([]string, 0, len(mm))
		for k := range mm {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(append(prefix, k), mm[k])
		}
	}
	walk(nil, m)
	return out
}

// lookupKeys returns the value at keys.
func lookupKeys(m map[string]any, keys []string) (any, bool) {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// semverOrNil parses a version; "" and non-semver give nil, as Merge does.
func semverOrNil(t testing.TB, s string) *semver.Version {
	t.Helper()
	v, err := semver.NewVersion(s)
	if err != nil {
		return nil
	}
	return v
}
