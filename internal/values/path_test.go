package values_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func TestParsePattern(t *testing.T) {
	for _, c := range []struct {
		text     string
		concrete bool
		keys     []string
	}{
		{"a", true, []string{"a"}},
		{"a.b.c", true, []string{"a", "b", "c"}},
		{"kube-vip.config", true, []string{"kube-vip", "config"}},
		{`metadata.annotations["storageclass.kubernetes.io/is-default-class"]`, true,
			[]string{"metadata", "annotations", "storageclass.kubernetes.io/is-default-class"}},
		{`["a.b"].c`, true, []string{"a.b", "c"}},
		{`['a.b'].c`, true, []string{"a.b", "c"}},
		{`a["b"]["c.d"]`, true, []string{"a", "b", "c.d"}},
		{`["*"]`, true, []string{"*"}},
		{`[""]`, true, []string{""}},
		{`["say \"hi\""]`, true, []string{`say "hi"`}},
		{"*", false, nil},
		{"**", false, nil},
		{"a.*.b", false, nil},
		{"**.image.tag", false, nil},
		{"promote.**", false, nil},
	} {
		p, err := values.ParsePattern(c.text)
		require.NoError(t, err, c.text)
		assert.Equal(t, c.text, p.String())
		assert.Equal(t, c.concrete, p.Concrete(), c.text)
		assert.Equal(t, c.keys, p.Keys(), c.text)
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "empty path"},
		{"   ", "empty path"},
		{"a..b", "empty key"},
		{".a", "empty key"},
		{"a.", "ends with a dot"},
		{"a*b", "special character"},
		{"a.***", "special character"},
		{"a b", "special character"},
		{`a"b`, "special character"},
		{`["abc`, "unterminated"},
		{`[a]`, "quoted key"},
		{`["a"x]`, "followed by ]"},
		{`["a"]b`, "must follow a bracketed key"},
		{`["\q"]`, "bad escape"},
		{strings.Repeat("a.", 63) + "a", "at most 63"},
	} {
		_, err := values.ParsePattern(c.text)
		if assert.Error(t, err, c.text) {
			assert.Contains(t, err.Error(), c.want, c.text)
		}
	}
	_, err := values.ParsePattern(strings.Repeat("a.", 62) + "a")
	assert.NoError(t, err, "63 keys are allowed")
}

func TestPatternMatch(t *testing.T) {
	for _, c := range []struct {
		pattern string
		path    string // dot-separated, "" is the root
		match   bool   // the path itself
		self    bool   // the path or an ancestor
	}{
		{"a.b", "a.b", true, true},
		{"a.b", "a.b.c", false, true},
		{"a.b", "a", false, false},
		{"a.b", "x.a.b", false, false},
		{"*", "a", true, true},
		{"*", "a.b", false, true},
		{"*", "", false, false},
		{"*.image.tag", "x.image.tag", true, true},
		{"*.image.tag", "image.tag", false, false},
		{"*.image.tag", "x.y.image.tag", false, false},
		{"**", "", true, true},
		{"**", "a.b.c", true, true},
		{"**.tag", "tag", true, true},
		{"**.tag", "a.b.c.tag", true, true},
		{"**.tag", "a.tag.x", false, true},
		{"**.tag", "a.tags", false, false},
		{"a.**", "a", true, true},
		{"a.**", "a.b.c", true, true},
		{"a.**", "ab", false, false},
		{"a.**.b", "a.b", true, true},
		{"a.**.b", "a.x.y.b", true, true},
		{"a.**.b", "a.x.y.c", false, false},
		{"**.resources", "containers.apiserver.resources.requests.cpu", false, true},
		{"a.*.b", "a.x.b", true, true},
		{"a.*.b", "a.b", false, false},
		{"**.*", "a", true, true},
		{"**.**", "", true, true},
	} {
		p, err := values.ParsePattern(c.pattern)
		require.NoError(t, err)
		var keys []string
		if c.path != "" {
			keys = strings.Split(c.path, ".")
		}
		assert.Equal(t, c.match, p.Match(keys), "%q matches %q", c.pattern, c.path)
		assert.Equal(t, c.self, p.MatchSelfOrAncestor(keys), "%q matches %q or an ancestor", c.pattern, c.path)
	}

	p, err := values.ParsePattern(`nodeSelector["node-role.kubernetes.io/control-plane"]`)
	require.NoError(t, err)
	assert.True(t, p.Match([]string{"nodeSelector", "node-role.kubernetes.io/control-plane"}))
	assert.False(t, p.Match([]string{"nodeSelector", "node-role", "kubernetes", "io/control-plane"}))
}

func TestFormatPath(t *testing.T) {
	for _, c := range []struct {
		keys []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b_c", "kube-vip", "X9"}, "a.b_c.kube-vip.X9"},
		{[]string{"nodeSelector", "kubernetes.io/os"}, `nodeSelector["kubernetes.io/os"]`},
		{[]string{"a.b", "c"}, `["a.b"].c`},
		{[]string{"*"}, `["*"]`},
		{[]string{""}, `[""]`},
		{[]string{`say "hi"`}, `["say \"hi\""]`},
		{[]string{"a b"}, `["a b"]`},
	} {
		got := values.FormatPath(c.keys)
		assert.Equal(t, c.want, got)
		if len(c.keys) == 0 {
			continue
		}
		p, err := values.ParsePattern(got)
		require.NoError(t, err, got)
		assert.Equal(t, c.keys, p.Keys(), "FormatPath output parses back")
	}
}

func TestParseValues(t *testing.T) {
	m, err := values.Parse([]byte("a: 1\nb: 1.0\nc: 1.5\nd: \"1\"\ne: null\nf: [1, x]\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a": int64(1), "b": int64(1), "c": 1.5, "d": "1", "e": nil, "f": []any{int64(1), "x"}}, m,
		"integral numbers are int64, whether written 1 or 1.0")
	m, err = values.Parse(nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, m)
	m, err = values.Parse([]byte("null\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, m)
	_, err = values.Parse([]byte("[1, 2]"))
	assert.ErrorContains(t, err, "map")
	_, err = values.Parse([]byte("a: [\n"))
	assert.Error(t, err)

	// anchors and aliases, as in the Harvester chart
	m, err = values.Parse([]byte("a: &v 1.1.1\nb: *v\n"))
	require.NoError(t, err)
	assert.Equal(t, "1.1.1", m["b"])
}
