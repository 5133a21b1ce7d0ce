package provenance

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/strvals"

	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func TestMarkReplacesStringsAndNumbersOnly(t *testing.T) {
	in := map[string]any{"a": map[string]any{"s": "x", "n": int64(3), "b": true, "e": "", "z": nil}, "l": []any{"p", 1.5}}
	out, marks := Mark(in)
	require.Equal(t, 6, marks.Len())
	a := out["a"].(map[string]any)
	require.Regexp(t, "^zqv[0-9]+vqz$", a["s"])
	require.Regexp(t, "^zqv[0-9]+vqz$", a["n"])
	require.Equal(t, true, a["b"])
	require.Regexp(t, "^zqv[0-9]+vqz$", a["e"], "an empty string no condition tests (a tag under default)")
	require.Regexp(t, "^zqv[0-9]+vqz$", a["z"], "a null no condition or range tests (a registry a helper defaults)")
	require.Regexp(t, "^zqv[0-9]+vqz$", out["l"].([]any)[1])
	require.Equal(t, "x", in["a"].(map[string]any)["s"], "the input is not changed")

	// a value a condition tests is kept, empty or not
	out, marks = Mark(in, []string{"a", "e"}, []string{"a", "s"}, []string{"a", "z"})
	require.Equal(t, 3, marks.Len())
	require.Equal(t, "", out["a"].(map[string]any)["e"])
	require.Nil(t, out["a"].(map[string]any)["z"])
	require.Equal(t, "x", out["a"].(map[string]any)["s"])
}

func TestPathStringAndUnit(t *testing.T) {
	require.Equal(t, "web.image.tag", PathString([]Step{"web", "image", "tag"}))
	require.Equal(t, `web.args[1]`, PathString([]Step{"web", "args", 1}))
	require.Equal(t, `a["b.c"].d`, PathString([]Step{"a", "b.c", "d"}))
	require.Equal(t, []string{"web", "args"}, Unit([]Step{"web", "args", 1, "x"}))
	vals := map[string]any{"web": map[string]any{"args": []any{"--a", "b"}}}
	require.Equal(t, []any{"--a", "c"}, UnitValue(vals, []Step{"web", "args", 1}, "c"))
	require.Equal(t, []any{"--a", "b"}, vals["web"].(map[string]any)["args"], "the values are not changed")
	require.Equal(t, "v", UnitValue(vals, []Step{"web", "x"}, "v"))
}

func TestMatchPartsTriesEverySplit(t *testing.T) {
	parts := split("zqv0vqz:zqv1vqz")
	var got [][]string
	matchParts(parts, "a:b:c", nil, func(p []string) bool { got = append(got, append([]string(nil), p...)); return true })
	require.Equal(t, [][]string{{"a", "b:c"}, {"a:b", "c"}}, got)
	got = nil
	matchParts(split("x-zqv0vqz"), "y-1", nil, func(p []string) bool { got = append(got, p); return true })
	require.Empty(t, got, "the literal text must be kept")
}

func TestCoerceKeepsTheValuesType(t *testing.T) {
	require.Equal(t, int64(3), coerce("3", 2))
	require.Equal(t, 1.5, coerce("1.5", 2.0))
	require.Equal(t, "3", coerce("3", "2"))
	require.Equal(t, "x", coerce("x", 2))
}

// TestSetFlagIsReadBackByHelm parses each flag with Helm's own parser
// (strvals, as helm and chart-upgrader read --set, --set-string and
// --set-json) and finds the value.
func TestSetFlagIsReadBackByHelm(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		v    any
	}{
		{[]string{"web", "image", "tag"}, "1-hotfix"},
		{[]string{"web", "image", "tag"}, "1"}, // a string that reads as a number
		{[]string{"a.b", "c"}, "x,y=z\\w"},
		{[]string{"json"}, `{"a":"b","c":[1]}`}, // strvals would read a leading brace as a list
		{[]string{"web", "replicas"}, int64(3)},
		{[]string{"debug"}, true},
		{[]string{"web", "args"}, []any{"--color", "green"}},
	} {
		flag := SetFlag(tc.keys, tc.v, false)
		name, arg, _ := strings.Cut(flag, " ")
		got := map[string]any{}
		var err error
		switch name {
		case "--set-string":
			err = strvals.ParseIntoString(arg, got)
		case "--set-json":
			err = strvals.ParseJSON(arg, got)
		default:
			err = strvals.ParseInto(arg, got)
		}
		require.NoError(t, err, flag)
		v, ok := values.Lookup(got, tc.keys)
		require.True(t, ok, "%s: %v", flag, got)
		require.Equal(t, values.Normalize(tc.v), values.Normalize(v), flag)
	}
	require.Empty(t, SetFlag([]string{"auth", "password"}, "hunter2", true), "no flag shows a secret, or renders its redaction")
}

// The adopt rule drift prints parses as a rule of a policy file, and
// names the path it was made for.
func TestAdoptRuleIsARuleOfThePolicyFile(t *testing.T) {
	for _, keys := range [][]string{{"web", "image", "tag"}, {"a.b", "c"}, {"metadata", "annotations", "example.com/tier"}, {"it's"}} {
		rule := AdoptRule(keys)
		p, err := spec.ParsePolicy("drift", []byte("rules:\n- "+rule+"\n"))
		require.NoError(t, err, rule)
		require.Len(t, p.Rules, 1)
		require.Equal(t, values.PolicyAdopt, p.Rules[0].Policy)
		require.True(t, p.Rules[0].Pattern.Match(keys), "%s matches %q", rule, keys)
	}
}

// A render error of the marked values names each marked value by its
// path, never by its marker or its value.
func TestUnmarkNamesThePathNotTheMarker(t *testing.T) {
	marked, marks := Mark(map[string]any{"image": map[string]any{"tag": "v1"}, "password": "hunter2"})
	err := "values don't meet the specifications of the schema: image.tag: " + marked["image"].(map[string]any)["tag"].(string) +
		" is not one of [v1 v2]; " + marked["password"].(string) + " is too long; zqv999vqz"
	got := marks.Unmark(err)
	require.Equal(t, "values don't meet the specifications of the schema: image.tag: ‹image.tag› is not one of [v1 v2]; ‹password› is too long; ‹a value›", got)
	require.NotContains(t, got, "hunter2")
	require.Equal(t, "plain", (*Marks)(nil).Unmark("plain"))
}
