package chart

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// chartsDir writes a directory of charts: app 1.0.0 as a directory (named
// unlike the chart), app 1.1.0 and 2.0.0-rc.1 as archives, tool 0.1.0, and
// things that are not charts.
func chartsDir(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := t.TempDir()
	for _, v := range []string{"1.1.0", "2.0.0-rc.1"} {
		d := filepath.Join(src, v)
		writeFiles(t, d, map[string]string{
			"Chart.yaml":        chartfile("app", v),
			"templates/cm.yaml": "kind: ConfigMap\napiVersion: v1\nmetadata: {name: app}\n",
		})
		require.NoError(t, os.WriteFile(filepath.Join(root, "app-"+v+".tgz"), packDir(t, d, "app"), 0o644))
	}
	writeFiles(t, root, map[string]string{
		"current/Chart.yaml":  chartfile("app", "1.0.0"),
		"current/values.yaml": "a: 1\n",
		"tool/Chart.yaml":     chartfile("tool", "0.1.0"),
		"README.md":           "charts\n",
		"notes/todo.txt":      "not a chart\n",
		"broken.tgz":          "not gzip",
	})
	return root
}

func TestDirSource(t *testing.T) {
	ctx := context.Background()
	root := chartsDir(t)
	src, err := NewSource(root, SourceOptions{})
	require.NoError(t, err)
	assert.Equal(t, root, src.String())

	versions, err := src.Versions(ctx, "app")
	require.NoError(t, err)
	assert.Equal(t, []string{"2.0.0-rc.1", "1.1.0", "1.0.0"}, versions)

	c, err := src.Load(ctx, "app", "1.1.0")
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", c.Metadata.Version)
	assert.Len(t, c.Templates, 1)

	c, err = src.Load(ctx, "app", "v1.0.0") // a "v" is forgiven
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", c.Metadata.Version)
	assert.Equal(t, int64(1), normalized(c.Values)["a"])

	_, err = src.Load(ctx, "app", "1.2.0")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, `chart app version "1.2.0" not found in `+root+"; available: 2.0.0-rc.1, 1.1.0, 1.0.0")
	assert.ErrorContains(t, err, "broken.tgz", "unreadable files are named")

	_, err = src.Versions(ctx, "nope")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, `chart "nope" not found in `+root+"; charts there: app, tool")
}

func TestDirSourceDuplicate(t *testing.T) {
	root := chartsDir(t)
	writeFiles(t, root, map[string]string{"copy/Chart.yaml": chartfile("app", "1.0.0")})
	src, err := NewSource(root, SourceOptions{})
	require.NoError(t, err)
	_, err = src.Load(context.Background(), "app", "1.0.0")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "more than once")
}

func TestDirSourceSingleChart(t *testing.T) {
	ctx := context.Background()
	dir := appChart(t)
	archive := writeFile(t, "whatever.tgz", packDir(t, dir, "app"))
	for _, ref := range []string{dir, archive} {
		src, err := NewSource(ref, SourceOptions{})
		require.NoError(t, err)
		versions, err := src.Versions(ctx, "app")
		require.NoError(t, err)
		assert.Equal(t, []string{"1.0.0"}, versions)
		c, err := src.Load(ctx, "app", "1.0.0")
		require.NoError(t, err)
		assert.Len(t, c.Dependencies(), 1)
	}
}

func TestDirSourceArchiveLimit(t *testing.T) {
	root := chartsDir(t)
	src, err := NewSource(root, SourceOptions{MaxArchiveBytes: 64})
	require.NoError(t, err)
	_, err = src.Load(context.Background(), "app", "1.1.0")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "larger than the limit of 64 bytes")
}

func TestNewSourceBadInput(t *testing.T) {
	for _, ref := range []string{"", filepath.Join(t.TempDir(), "missing"), "s3://bucket/charts", "oci://", "https://"} {
		_, err := NewSource(ref, SourceOptions{})
		require.ErrorIs(t, err, outcome.ErrBadInput, "ref %q", ref)
	}
	_, err := NewSource(t.TempDir(), SourceOptions{MaxIndexBytes: -1})
	require.ErrorIs(t, err, outcome.ErrBadInput)
}

func TestLatest(t *testing.T) {
	ctx := context.Background()
	root := chartsDir(t)
	writeFiles(t, root, map[string]string{
		"v2/Chart.yaml":  chartfile("app", "1.2.3"),
		"v3/Chart.yaml":  chartfile("app", "1.10.0-beta.1"),
		"old/Chart.yaml": chartfile("app", "0.9.0"),
	})
	src, err := NewSource(root, SourceOptions{})
	require.NoError(t, err)

	tests := []struct {
		constraint string
		devel      bool
		want       string
	}{
		{"", false, "1.2.3"},
		{"*", false, "1.2.3"},
		{"", true, "2.0.0-rc.1"},
		{"~1.1", false, "1.1.0"},
		{"~1.2", true, "1.2.3"},
		{"^1.0", false, "1.2.3"},
		{"^1.0", true, "1.10.0-beta.1"},
		{"<1.0.0", false, "0.9.0"},
		{">=1.1.0, <1.2.0", false, "1.1.0"},
		{"1.0.0", false, "1.0.0"},
		{">=2.0.0-0", false, ""},
		{">=2.0.0-0", true, "2.0.0-rc.1"},
	}
	for _, tt := range tests {
		got, err := Latest(ctx, src, "app", tt.constraint, tt.devel)
		if tt.want == "" {
			require.ErrorIs(t, err, outcome.ErrBadInput, "%q devel=%v", tt.constraint, tt.devel)
			assert.ErrorContains(t, err, "available: 2.0.0-rc.1, 1.10.0-beta.1, 1.2.3")
			continue
		}
		require.NoError(t, err, "%q devel=%v", tt.constraint, tt.devel)
		assert.Equal(t, tt.want, got, "%q devel=%v", tt.constraint, tt.devel)
	}

	_, err = Latest(ctx, src, "app", ">=3", false)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, `no versions of chart app in `+root+` satisfy ">=3"`)

	_, err = Latest(ctx, src, "app", "not a constraint", false)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, `version constraint "not a constraint"`)

	_, err = Latest(ctx, src, "nope", "", false)
	require.ErrorIs(t, err, outcome.ErrBadInput)
}
