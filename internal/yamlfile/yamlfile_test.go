package yamlfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func TestParse(t *testing.T) {
	f := File{Name: "f.yaml"}
	t.Run("one document", func(t *testing.T) {
		for _, in := range []string{"a: 1\n", "---\na: 1\n", "a: 1\n---\n", "a: 1\n---\n# done\n---\nnull\n"} {
			root, err := f.Parse([]byte(in), "empty")
			require.NoError(t, err, "%q", in)
			m, err := f.Entries(root, "")
			require.NoError(t, err, "%q", in)
			assert.Equal(t, []string{"a"}, m.Names(), "%q", in)
		}
	})
	t.Run("aliases are followed", func(t *testing.T) {
		root, err := f.Parse([]byte("a: &x {b: text}\nc: *x\n"), "empty")
		require.NoError(t, err)
		m, err := f.Fields(root, "", "a", "c")
		require.NoError(t, err)
		inner, err := f.Fields(m.Get("c"), m.Path("c"), "b")
		require.NoError(t, err)
		s, err := f.String(inner.Get("b"), inner.Path("b"))
		require.NoError(t, err)
		assert.Equal(t, "text", s)
	})
	tests := []struct{ name, in, want string }{
		{"empty", "", "f.yaml: nothing here"},
		{"blank", "\n  \n", "f.yaml: nothing here"},
		{"only a comment", "# x\n", "f.yaml: nothing here"},
		{"only null", "~\n", "f.yaml: nothing here"},
		{"only document markers", "---\n---\n", "f.yaml: nothing here"},
		{"second document", "a: 1\n---\nb: 2\n", "f.yaml:2: a second YAML document; the file must hold one"},
		{"second document after an empty one", "---\n---\nb: 2\n", "f.yaml:2: a second YAML document; the file must hold one"},
		{"syntax error with a line", "a: [\n", "f.yaml:1: invalid YAML: did not find expected node content"},
		{"syntax error in a second document", "a: 1\n---\nb: [\n", "f.yaml:3: invalid YAML: did not find expected node content"},
		{"syntax error without a line", "a: *nope\n", "f.yaml: invalid YAML: unknown anchor 'nope' referenced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Parse([]byte(tt.in), "nothing here")
			require.Error(t, err)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			var ferr *Error
			require.True(t, errors.As(err, &ferr))
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

// walk parses in and returns its root as checked Fields with keys a, b, c.
func walk(t *testing.T, in string) (File, *Fields) {
	t.Helper()
	f := File{Name: "f.yaml"}
	root, err := f.Parse([]byte(in), "empty")
	require.NoError(t, err)
	m, err := f.Fields(root, "top", "a", "b", "c")
	require.NoError(t, err)
	return f, m
}

func TestFields(t *testing.T) {
	f, m := walk(t, "b: x\na: ~\n")
	assert.Equal(t, []string{"b", "a"}, m.Names(), "file order")
	assert.Nil(t, m.Get("a"), "null is absent")
	assert.NotNil(t, m.Key("a"), "but its key is there")
	assert.Nil(t, m.Get("c"))
	assert.Equal(t, "top.b", m.Path("b"))

	_, err := f.Required(m, "a")
	assert.EqualError(t, err, "f.yaml:2: top.a: missing a value (required)")
	_, err = f.Required(m, "c")
	assert.EqualError(t, err, `f.yaml:1: top: missing required field "c"`)
	s, err := f.OptString(m, "c")
	assert.NoError(t, err)
	assert.Empty(t, s)
	s, n, err := f.ReqString(m, "b")
	require.NoError(t, err)
	assert.Equal(t, "x", s)
	assert.Equal(t, 1, n.Line)

	f, m = walk(t, "a: '  '\n")
	_, _, err = f.ReqString(m, "a")
	assert.EqualError(t, err, "f.yaml:1: top.a: must not be empty")

	root, err := f.Parse([]byte("a: 1\nz: 2\n"), "empty")
	require.NoError(t, err)
	_, err = f.Fields(root, "", "a")
	assert.EqualError(t, err, "f.yaml:2: z: unknown field (want one of a)")
	_, err = f.Fields(root, "", "z")
	assert.EqualError(t, err, "f.yaml:1: a: unknown field (want one of z)")
	m, err = f.Entries(root, "")
	require.NoError(t, err, "any string key")
	assert.Equal(t, []string{"a", "z"}, m.Names())

	for in, want := range map[string]string{
		"[a]\n":              "f.yaml:1: want a map, not a list",
		"? [a]\n: b\n":       "f.yaml:1: want a field name, not a list",
		"~: b\n":             "f.yaml:1: want a field name, not null",
		"2024-01-02: b\n":    `f.yaml:1: want a field name, not a timestamp (write "2024-01-02" for the text)`,
		"a: 1\n<<: {b: 2}\n": "f.yaml:2: merge keys (<<) are not supported",
		"a: 1\n'a': 2\n":     "f.yaml:2: a: duplicate field (first at line 1)",
		"&k a: 1\n*k : 2\n":  "f.yaml:2: a: duplicate field (first at line 1)",
	} {
		root, err := f.Parse([]byte(in), "empty")
		require.NoError(t, err, in)
		_, err = f.Entries(root, "")
		assert.EqualError(t, err, want, in)
		assert.ErrorIs(t, err, outcome.ErrBadInput, in)
	}
}

func TestTypes(t *testing.T) {
	f := File{Name: "f.yaml"}
	node := func(in string) *Fields {
		root, err := f.Parse([]byte("v: "+in+"\n"), "empty")
		require.NoError(t, err)
		m, err := f.Fields(root, "", "v")
		require.NoError(t, err)
		return m
	}
	strs := map[string]string{
		`text`:     "",
		`"1.10"`:   "",
		`!!str 12`: "",
		`1.10`:     `f.yaml:1: v: want a string, not a number (write "1.10" for the text)`,
		`0x1F`:     `f.yaml:1: v: want a string, not a number (write "0x1F" for the text)`,
		`true`:     `f.yaml:1: v: want a string, not a bool (write "true" for the text)`,
		`[a]`:      `f.yaml:1: v: want a string, not a list`,
		`{a: b}`:   `f.yaml:1: v: want a string, not a map`,
		`!x text`:  `f.yaml:1: v: want a string, not a value tagged !x`,
	}
	for in, want := range strs {
		m := node(in)
		_, err := f.String(m.Get("v"), "v")
		if want == "" {
			assert.NoError(t, err, in)
		} else {
			assert.EqualError(t, err, want, in)
			assert.ErrorIs(t, err, outcome.ErrBadInput, in)
		}
	}

	bools := map[string]string{
		`true`:   "",
		`false`:  "",
		`"true"`: "f.yaml:1: v: want true or false, not a string",
		`yes`:    "f.yaml:1: v: want true or false, not a string",
		`1`:      "f.yaml:1: v: want true or false, not a number",
	}
	for in, want := range bools {
		m := node(in)
		b, err := f.Bool(m.Get("v"), "v")
		if want == "" {
			assert.NoError(t, err, in)
			assert.Equal(t, in == "true", b, in)
		} else {
			assert.EqualError(t, err, want, in)
		}
	}

	durations := map[string]string{
		`90s`:    "",
		`"1h5m"`: "",
		`soon`:   `f.yaml:1: v: want a positive duration such as 1m, not "soon"`,
		`0s`:     `f.yaml:1: v: want a positive duration such as 1m, not "0s"`,
		`-5s`:    `f.yaml:1: v: want a positive duration such as 1m, not "-5s"`,
		`60`:     `f.yaml:1: v: want a positive duration such as 1m, not a number (60)`,
		`[1m]`:   `f.yaml:1: v: want a positive duration such as 1m, not a list`,
	}
	for in, want := range durations {
		m := node(in)
		d, err := f.Duration(m.Get("v"), "v", "1m")
		if want == "" {
			assert.NoError(t, err, in)
			assert.Positive(t, d, in)
		} else {
			assert.EqualError(t, err, want, in)
		}
	}
	m := node("90s")
	d, err := f.Duration(m.Get("v"), "v", "1m")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, d)

	m = node("{a: b}")
	_, err = f.Sequence(m.Get("v"), "v")
	assert.EqualError(t, err, "f.yaml:1: v: want a list, not a map")
	m = node("[&x a, *x]")
	items, err := f.Sequence(m.Get("v"), "v")
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.Equal(t, "a", items[1].Value, "aliases followed")
}

func TestPaths(t *testing.T) {
	assert.Equal(t, "a", Child("", "a"))
	assert.Equal(t, "a.b-c_1", Child("a", "b-c_1"))
	assert.Equal(t, `a["b.c"]`, Child("a", "b.c"))
	assert.Equal(t, `["a/b"]`, Child("", "a/b"))
	assert.Equal(t, "rules[1]", Index("rules", 0))
	assert.Equal(t, "a.rules[12]", Index("a.rules", 11))
}

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	_, err := Read(path, "thing")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "reading thing: ")
	assert.Contains(t, err.Error(), path)

	require.NoError(t, os.WriteFile(path, []byte("a: 1\n"), 0o600))
	data, err := Read(path, "thing")
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", string(data))
}
