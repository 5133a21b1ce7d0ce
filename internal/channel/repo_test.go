package channel

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// harvesterVersions are the versions test repositories hold.
var harvesterVersions = []string{"1.3.0", "1.4.0", "1.4.2", "1.5.0-rc.1", "2.0.0", "2.1.0-beta.1"}

func TestResolveRepo(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	r.set("other", "9.9.9")
	tests := []struct {
		constraint string
		devel      bool
		want       string
	}{
		{"", false, "2.0.0"},
		{"*", false, "2.0.0"},
		{">=1.4.0 <2.0.0", false, "1.4.2"},
		{"~1.4", false, "1.4.2"},
		{"1.3.0", false, "1.3.0"},
		{"*", true, "2.1.0-beta.1"},
		{">=1.4.0 <2.0.0", true, "1.5.0-rc.1"},
	}
	for _, tt := range tests {
		got, err := ResolveRepo(t.Context(), r.URL(), "harvester", tt.constraint, tt.devel, fast())
		require.NoError(t, err, "%q devel=%v", tt.constraint, tt.devel)
		assert.Equal(t, tt.want, got, "%q devel=%v", tt.constraint, tt.devel)
	}
}

func TestResolveRepoErrors(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	t.Run("nothing satisfies", func(t *testing.T) {
		_, err := ResolveRepo(t.Context(), r.URL(), "harvester", ">=3.0.0", false, fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, `satisfy ">=3.0.0"; available: 2.1.0-beta.1, 2.0.0, 1.5.0-rc.1, 1.4.2, 1.4.0, 1.3.0`)
		assert.ErrorContains(t, err, r.URL())
	})
	t.Run("bad constraint", func(t *testing.T) {
		_, err := ResolveRepo(t.Context(), r.URL(), "harvester", ">=banana", false, fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, `version constraint ">=banana"`)
	})
	t.Run("unknown chart", func(t *testing.T) {
		_, err := ResolveRepo(t.Context(), r.URL(), "rancher", "", false, fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, "charts there: harvester")
	})
	t.Run("no chart name", func(t *testing.T) {
		_, err := ResolveRepo(t.Context(), r.URL(), "", "", false, fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput)
	})
	t.Run("404 is not retried", func(t *testing.T) {
		before := r.hits.Load()
		_, err := ResolveRepo(t.Context(), r.srv.URL+"/nowhere", "harvester", "", false, fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Equal(t, before, r.hits.Load())
	})
	t.Run("500 is retried", func(t *testing.T) {
		r.fail(http.StatusInternalServerError)
		before := r.hits.Load()
		_, err := ResolveRepo(t.Context(), r.URL(), "harvester", "", false, fast())
		assert.NotErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, "gave up after 3 attempts")
		assert.EqualValues(t, 3, r.hits.Load()-before)
		r.fail(0)
	})
}

func TestResolveRepoTLS(t *testing.T) {
	r := newRepo(t, true, "harvester", harvesterVersions...)
	opts := fast()
	opts.CAFile = writeCA(t, r.srv)
	got, err := ResolveRepo(t.Context(), r.URL(), "harvester", "~1.4", false, opts)
	require.NoError(t, err)
	assert.Equal(t, "1.4.2", got)

	_, err = ResolveRepo(t.Context(), r.URL(), "harvester", "~1.4", false, fast())
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "TLS certificate not trusted")
}

func TestResolveRepoDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0-rc.1"} {
		writeFile(t, filepath.Join(dir, "app-"+v, "Chart.yaml"), "apiVersion: v2\nname: app\nversion: "+v+"\n")
	}
	got, err := ResolveRepo(t.Context(), dir, "app", "", false, fast())
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", got)
	got, err = ResolveRepo(t.Context(), dir, "app", "", true, fast())
	require.NoError(t, err)
	assert.Equal(t, "2.0.0-rc.1", got)
}

func TestResolveQuery(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	ts, _ := serve(t, redirectTo(http.StatusFound, "/r/1.0.0"))
	got, err := ResolveQuery(t.Context(), Query{Channel: ts.URL + "/c"}, fast())
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", got)
	got, err = ResolveQuery(t.Context(), Query{Repo: r.URL(), Chart: "harvester", Constraint: "<2"}, fast())
	require.NoError(t, err)
	assert.Equal(t, "1.4.2", got)
	for _, q := range []Query{{}, {Channel: ts.URL, Repo: r.URL()}, {Channel: ts.URL, Chart: "x"}, {Channel: ts.URL, Devel: true}} {
		_, err := ResolveQuery(t.Context(), q, fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput, "%+v", q)
	}
}
