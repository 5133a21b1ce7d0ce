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
	got, err := Overrides([]string{a, b}, []string{"image.tag=2.0,image.pullPolicy=Always", "ports={80,443}", "ratio=0.5"})
	require.NoError(t, err)
	assert.Equal(t, []values.Override{
		{Origin: "-f " + a, Values: map[string]any{"replicas": int64(2), "image": map[string]any{"tag": "1.0"}}},
		{Origin: "-f " + b, Values: map[string]any{"replicas": int64(3)}}, // 3.0 is the integer 3
		{Origin: "--set image.pullPolicy,image.tag", Values: map[string]any{"image": map[string]any{"tag": "2.0", "pullPolicy": "Always"}}},
		{Origin: "--set ports", Values: map[string]any{"ports": []any{int64(80), int64(443)}}},
		{Origin: "--set ratio", Values: map[string]any{"ratio": "0.5"}}, // as Helm: --set makes integers, never floats
	}, got)

	none, err := Overrides(nil, nil)
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestOverridesOriginsNamePathsNeverValues(t *testing.T) {
	got, err := Overrides(nil, []string{"db.password=hunter2-do-not-print,db.user=admin"})
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
		{"missing -f", []string{missing}, nil, "-f: open " + missing + ": "},
		{"-f not YAML", []string{notYAML}, nil, "-f " + notYAML + ": invalid YAML: "},
		{"-f not a map", []string{list}, nil, "-f " + list + ": values must be a map, not "},
		{"--set without a value", nil, []string{"replicas"}, `--set "replicas": `},
		{"a bad --set after good ones", nil, []string{"a=1", "b={1,2"}, `--set "b={1,2": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Overrides(tc.files, tc.sets)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.True(t, strings.HasPrefix(err.Error(), tc.prefix), "%q does not start with %q", err.Error(), tc.prefix)
		})
	}
}

func TestABadSetOfASecretLookingKeyShowsNoValue(t *testing.T) {
	// the parser would say `key "et" has no value`: a piece of the password
	_, err := Overrides(nil, []string{"admin.password=s3cr,et"})
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Equal(t, `--set "admin.password=<redacted>": not in Helm's --set syntax (values not shown: the item mentions a secret-looking key)`, err.Error())
	assert.NotContains(t, err.Error(), "s3cr")
	assert.NotContains(t, err.Error(), `"et"`)

	// an item that only mentions a secret-looking word later is hidden too
	err = setError("name=x,apiToken", errors.New(`key "apiToken" has no value`))
	assert.Equal(t, `--set "name=<redacted>": not in Helm's --set syntax (values not shown: the item mentions a secret-looking key)`, err.Error())

	// other items keep the parser's message, which helps
	parse := errors.New(`key "b" has no value`)
	err = setError("replicas=2,b", parse)
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
		{"no --values", MergeFiles{Chart: chartDir}, "--values is required"},
		{"no --chart", MergeFiles{Values: vals}, "--chart is required"},
		{"--values missing", MergeFiles{Values: vals + ".missing", Chart: chartDir}, "--values: open " + vals + ".missing: "},
		{"bad --from-version", MergeFiles{Values: vals, Chart: chartDir, FromVersion: "one"}, `--from-version "one": not a semantic version: `},
		{"bad --to-version", MergeFiles{Values: vals, Chart: chartDir, ToVersion: "2.x.y"}, `--to-version "2.x.y": not a semantic version: `},
		{"--live missing", MergeFiles{Values: vals, Chart: chartDir, Live: vals + ".live"}, "--live: open " + vals + ".live: "},
		{"--live not objects", MergeFiles{Values: vals, Chart: chartDir, Live: writeFile(t, "live.yaml", "- 1\n")}, "--live "},
		{"bad --set", MergeFiles{Values: vals, Chart: chartDir, Set: []string{"x"}}, `--set "x": `},
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
		Files: []string{extra}, Set: []string{"data.d=set"}, FromVersion: "1.0.0", ToVersion: "v2.0.0"})
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
	_, err := Overrides(nil, []string{"replicas[0=3"})
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Contains(t, err.Error(), `--set "replicas[0=3": sets no value`)
	_, err = Overrides(nil, []string{"auth.password[=hunter2"})
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.NotContains(t, err.Error(), "hunter2")
}
