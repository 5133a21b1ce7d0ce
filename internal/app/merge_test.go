package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
)

// writeFile writes content to name in a fresh directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestOverridesFilesThenSetsInHelmsOrder(t *testing.T) {
	a := writeFile(t, "a.yaml", "replicas: 2\nimage: {tag: \"1.0\"}\n")
	b := writeFile(t, "b.yaml", "replicas: 3.0\n")
	got, err := Overrides(Explicit{Files: []string{a, b}, Set: []string{"image.tag=2.0,image.pullPolicy=Always", "ports={80,443}", "ratio=0.5"}})
	require.NoError(t, err)
	assert.Equal(t, []values.Override{
		{Origin: "-f " + a, Values: map[string]any{"replicas": int64(2), "image": map[string]any{"tag": "1.0"}}},
		{Origin: "-f " + b, Values: map[string]any{"replicas": int64(3)}}, // 3.0 is the integer 3
		{Origin: "--set image.pullPolicy,image.tag", Values: map[string]any{"image": map[string]any{"tag": "2.0", "pullPolicy": "Always"}}},
		{Origin: "--set ports", Values: map[string]any{"ports": []any{int64(80), int64(443)}}},
		{Origin: "--set ratio", Values: map[string]any{"ratio": "0.5"}}, // as Helm: --set makes integers, never floats
	}, got)

	none, err := Overrides(Explicit{})
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestOverridesOriginsNamePathsNeverValues(t *testing.T) {
	got, err := Overrides(Explicit{Set: []string{"db.password=hunter2-do-not-print,db.user=admin"}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "--set db.password,db.user", got[0].Origin)
	assert.NotContains(t, got[0].Origin, "hunter2")
	assert.Equal(t, map[string]any{"db": map[string]any{"password": "hunter2-do-not-print", "user": "admin"}}, got[0].Values)
}

func TestOverridesErrorsAreBadInputNamingTheFlagAndFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	notYAML := writeFile(t, "bad.yaml", "a: [1, 2\n")
	list := writeFile(t, "list.yaml", "- a\n- b\n")
	for _, tc := range []struct {
		name        string
		files, sets []string
		prefix      string
	}{
		{"missing -f", []string{missing}, nil, "reading -f: open " + missing + ": "},
		{"-f not YAML", []string{notYAML}, nil, "-f " + notYAML + ": invalid YAML: "},
		{"-f not a map", []string{list}, nil, "-f " + list + ": values must be a map, not "},
		{"--set without a value", nil, []string{"replicas"}, `--set "replicas": `},
		{"a bad --set after good ones", nil, []string{"a=1", "b={1,2"}, `--set "b={1,2": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Overrides(Explicit{Files: tc.files, Set: tc.sets})
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.True(t, strings.HasPrefix(err.Error(), tc.prefix), "%q does not start with %q", err.Error(), tc.prefix)
		})
	}
}

func TestABadSetOfASecretLookingKeyShowsNoValue(t *testing.T) {
	// the parser would say `key "et" has no value`: a piece of the password
	_, err := Overrides(Explicit{Set: []string{"admin.password=s3cr,et"}})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Equal(t, `--set "admin.password=<redacted>": not in Helm's --set syntax (values not shown: the item mentions a secret-looking key)`, err.Error())
	assert.NotContains(t, err.Error(), "s3cr")
	assert.NotContains(t, err.Error(), `"et"`)

	// an item that only mentions a secret-looking word later is hidden too
	err = setError("--set", "name=x,apiToken", errors.New(`key "apiToken" has no value`))
	assert.Equal(t, `--set "name=<redacted>": not in Helm's --set syntax (values not shown: the item mentions a secret-looking key)`, err.Error())

	// other items keep the parser's message, which helps
	parse := errors.New(`key "b" has no value`)
	err = setError("--set", "replicas=2,b", parse)
	assert.Equal(t, `--set "replicas=2,b": key "b" has no value`, err.Error())
	assert.ErrorIs(t, err, parse)
}

func TestVersionFlag(t *testing.T) {
	for _, v := range []string{"", "1.2.3", "v1.2.3", "1.2.3-rc.1+build.5", "1.2"} {
		got, err := versionFlag("--to-version", v)
		require.NoError(t, err, v)
		assert.Equal(t, v, got, "given as is")
	}
	got, err := versionFlag("--from-version", "latest")
	require.Error(t, err)
	assert.Equal(t, "", got)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), `--from-version "latest": not a semantic version: `), err.Error())
}

// demoChart writes chart demo at version with the default values
// {data: defaults} and one ConfigMap template; it returns the chart's
// directory.
func demoChart(t *testing.T, dir, version string, defaults map[string]any) string {
	t.Helper()
	path, err := testchart.Write(dir, testchart.ConfigMapChart("demo", version, defaults))
	require.NoError(t, err)
	return path
}

func TestLoadOfflineRequiresValuesAndChart(t *testing.T) {
	vals := writeFile(t, "values.yaml", "replicas: 1\n")
	chartDir := demoChart(t, t.TempDir(), "1.0.0", map[string]any{"a": "1"})
	for _, tc := range []struct {
		name string
		in   MergeFiles
		want string // the message, or its beginning when it ends in ": "
	}{
		{"no --values", MergeFiles{Chart: chartDir}, "--values is required: the user values the target holds today, that the rules decide from (FILE, or - for standard input)"},
		{"-f without --values", MergeFiles{Chart: chartDir, Explicit: Explicit{Files: []string{vals}}}, "--values is required: the user values the target holds today, that the rules decide from (FILE, or - for standard input); the -f files are overrides applied after the rules, as with helm -f, not the current values"},
		{"no --chart", MergeFiles{Values: vals}, "--chart is required"},
		{"--values missing", MergeFiles{Values: vals + ".missing", Chart: chartDir}, "reading --values: open " + vals + ".missing: "},
		{"bad --from-version", MergeFiles{Values: vals, Chart: chartDir, FromVersion: "one"}, `--from-version "one": not a semantic version: `},
		{"bad --to-version", MergeFiles{Values: vals, Chart: chartDir, ToVersion: "2.x.y"}, `--to-version "2.x.y": not a semantic version: `},
		{"--live missing", MergeFiles{Values: vals, Chart: chartDir, Live: vals + ".live"}, "reading --live: open " + vals + ".live: "},
		{"--live not objects", MergeFiles{Values: vals, Chart: chartDir, Live: writeFile(t, "live.yaml", "- 1\n")}, "--live "},
		{"bad --set", MergeFiles{Values: vals, Chart: chartDir, Explicit: Explicit{Set: []string{"x"}}}, `--set "x": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadOffline(tc.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			if strings.HasSuffix(tc.want, ": ") || strings.HasSuffix(tc.want, " ") {
				assert.True(t, strings.HasPrefix(err.Error(), tc.want), "%q does not start with %q", err.Error(), tc.want)
			} else {
				assert.Equal(t, tc.want, err.Error())
			}
		})
	}

	// a chart that does not load names its flag
	_, err := loadOffline(MergeFiles{Values: vals, Chart: filepath.Join(t.TempDir(), "nochart")})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "--chart: "), err.Error())
	_, err = loadOffline(MergeFiles{Values: vals, Chart: chartDir, OldChart: filepath.Join(t.TempDir(), "nochart")})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "--old-chart: "), err.Error())
}

func TestLoadOfflineReadsEveryInput(t *testing.T) {
	charts := t.TempDir()
	oldDir := demoChart(t, charts, "1.0.0", map[string]any{"a": "1"})
	newDir := demoChart(t, charts, "2.0.0", map[string]any{"a": "2", "b": "new"})
	vals := writeFile(t, "values.yaml", "data: {a: mine}\n")
	extra := writeFile(t, "extra.yaml", "data: {c: extra}\n")
	live := writeFile(t, "live.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: apps}\ndata: {k: v}\n")

	in, err := loadOffline(MergeFiles{Values: vals, Chart: newDir, OldChart: oldDir, Live: live,
		Explicit: Explicit{Files: []string{extra}, Set: []string{"data.d=set"}}, FromVersion: "1.0.0", ToVersion: "v2.0.0"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"data": map[string]any{"a": "mine"}}, in.User)
	require.NotNil(t, in.New)
	assert.Equal(t, "demo", in.New.Name)
	assert.Equal(t, "2.0.0", in.New.Version)
	assert.Equal(t, map[string]any{"a": "2", "b": "new"}, in.New.Defaults["data"])
	require.NotNil(t, in.Old)
	assert.Equal(t, "1.0.0", in.Old.Version)
	assert.Equal(t, map[string]any{"a": "1"}, in.Old.Defaults["data"])
	assert.Equal(t, "1.0.0", in.FromVersion)
	assert.Equal(t, "v2.0.0", in.ToVersion)
	cm, ok := in.Live.Get(values.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "cfg"})
	require.True(t, ok)
	assert.Equal(t, map[string]any{"k": "v"}, cm["data"])
	assert.Equal(t, []values.Override{
		{Origin: "-f " + extra, Values: map[string]any{"data": map[string]any{"c": "extra"}}},
		{Origin: "--set data.d", Values: map[string]any{"data": map[string]any{"d": "set"}}},
	}, in.Overrides)

	// without --old-chart and versions: none
	in, err = loadOffline(MergeFiles{Values: vals, Chart: newDir})
	require.NoError(t, err)
	assert.Nil(t, in.Old)
	assert.Equal(t, "", in.FromVersion)
	assert.Equal(t, "", in.ToVersion)
	assert.Nil(t, in.Live)
	assert.Empty(t, in.Overrides)
}

func TestMergeOfflineStopsAtBadInput(t *testing.T) {
	res, err := MergeOffline(context.Background(), MergeFiles{})
	assert.Nil(t, res)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Equal(t, outcome.ExitBadInput, outcome.Code(err))
}

// An item Helm 4's parser drops without an error (an unclosed index) is
// bad input naming it, not a --set that silently sets nothing; one with a
// secret-looking key is named without its value.
func TestOverridesRefuseAnItemThatSetsNothing(t *testing.T) {
	_, err := Overrides(Explicit{Set: []string{"replicas[0=3"}})
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Contains(t, err.Error(), `--set "replicas[0=3": sets no value`)
	_, err = Overrides(Explicit{Set: []string{"auth.password[=hunter2"}})
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.NotContains(t, err.Error(), "hunter2")
}

// Each of Helm's value flags is parsed by Helm's own strvals, with Helm's
// types, and applied in Helm's order: -f, --set-json, --set, --set-string,
// --set-file, --set-literal. The origin names the flag and the paths.
func TestOverridesOfEverySetFlagInHelmsOrder(t *testing.T) {
	cert := writeFile(t, "tls.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n")
	got, err := Overrides(Explicit{
		Files:   []string{writeFile(t, "f.yaml", "replicas: 1\n")},
		JSON:    []string{`resources={"limits":{"cpu":"2"}}`, `{"ports":[80,443]}`},
		Set:     []string{"replicas=3"},
		String:  []string{"image.tag=1.10", "enabled=true"},
		File:    []string{"tls.cert=" + cert},
		Literal: []string{"args={a,b}.c"},
	})
	require.NoError(t, err)
	var origins []string
	for _, o := range got {
		origins = append(origins, o.Origin)
	}
	// the -f origin holds a temporary path: checked by its prefix
	assert.True(t, strings.HasPrefix(origins[0], "-f "), origins[0])
	assert.Equal(t, []string{
		"--set-json resources.limits.cpu", "--set-json ports", "--set replicas",
		"--set-string image.tag", "--set-string enabled", "--set-file tls.cert", "--set-literal args",
	}, origins[1:])
	assert.Equal(t, map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "2"}}}, got[1].Values)
	assert.Equal(t, map[string]any{"ports": []any{int64(80), int64(443)}}, got[2].Values)
	assert.Equal(t, map[string]any{"replicas": int64(3)}, got[3].Values)
	assert.Equal(t, map[string]any{"image": map[string]any{"tag": "1.10"}}, got[4].Values, "--set-string keeps 1.10 a string")
	assert.Equal(t, map[string]any{"enabled": "true"}, got[5].Values, "--set-string keeps true a string")
	assert.Equal(t, map[string]any{"tls": map[string]any{"cert": "-----BEGIN CERTIFICATE-----\nMIIB\n"}}, got[6].Values)
	assert.Equal(t, map[string]any{"args": "{a,b}.c"}, got[7].Values, "--set-literal takes the value as is")
}

func TestBadItemsOfEverySetFlagNameTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name string
		in   Explicit
		want string
	}{
		{"--set-json not JSON", Explicit{JSON: []string{"a={x"}}, `--set-json "a={x": `},
		{"--set-json a broken object", Explicit{JSON: []string{`{"a":`}}, `--set-json "{\"a\":": not a JSON object: `},
		{"--set-string without =", Explicit{String: []string{"tag"}}, `--set-string "tag": `},
		{"--set-file missing", Explicit{File: []string{"tls.cert=" + missing}}, "reading --set-file: open " + missing},
		{"--set-literal without a key", Explicit{Literal: []string{"=x"}}, `--set-literal "=x": `},
		{"--set-json of a secret", Explicit{JSON: []string{`db.password={"x`}}, `--set-json "db.password=<redacted>": not in Helm's --set-json syntax`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Overrides(tc.in)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "%q does not start with %q", err.Error(), tc.want)
		})
	}
}

// "-" reads standard input, as `helm -f -` does; errors name it.
func TestAValuesFileFromStandardInput(t *testing.T) {
	withStdin(t, "replicas: 4\n")
	got, err := Overrides(Explicit{Files: []string{"-"}})
	require.NoError(t, err)
	assert.Equal(t, []values.Override{{Origin: "-f standard input", Values: map[string]any{"replicas": int64(4)}}}, got)

	withStdin(t, "a: [1\n")
	_, err = readValues("--values", "-")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), "--values standard input: invalid YAML"), err.Error())
}

// withStdin makes os.Stdin a file holding content for the test.
func withStdin(t *testing.T, content string) {
	t.Helper()
	f, err := os.Open(writeFile(t, "stdin", content))
	require.NoError(t, err)
	old := os.Stdin
	os.Stdin = f
	t.Cleanup(func() { os.Stdin = old; _ = f.Close() })
}
