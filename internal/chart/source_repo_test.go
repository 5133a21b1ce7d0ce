package chart

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// repoServer serves a Helm repository at /charts on loopback: app 1.0.0
// (relative URL), 1.1.0 (absolute URL elsewhere on the server), 1.2.0 (wrong
// digest), 1.3.0 (archive missing), 1.4.0 (no digest), and 15 versions of
// "many".
func repoServer(t *testing.T, tls bool) *httptest.Server {
	t.Helper()
	archives := map[string][]byte{}
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0", "1.4.0"} {
		dir := filepath.Join(t.TempDir(), "app")
		writeFiles(t, dir, map[string]string{
			"Chart.yaml":  chartfile("app", v),
			"values.yaml": "version: " + v + "\n",
		})
		archives[v] = packDir(t, dir, "app")
	}
	digest := func(v string) string {
		sum := sha256.Sum256(archives[v])
		return hex.EncodeToString(sum[:])
	}

	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("/charts/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nentries:\n  app:\n")
		entry := func(v, url, digest string) {
			fmt.Fprintf(&b, "  - apiVersion: v2\n    name: app\n    version: %s\n    urls: [%q]\n", v, url)
			if digest != "" {
				fmt.Fprintf(&b, "    digest: %s\n", digest)
			}
		}
		entry("1.0.0", "app-1.0.0.tgz", digest("1.0.0"))
		entry("1.1.0", srv.URL+"/elsewhere/app-1.1.0.tgz", strings.ToUpper(digest("1.1.0")))
		entry("1.2.0", "app-1.2.0.tgz", digest("1.0.0"))
		entry("1.3.0", "app-1.3.0.tgz", "")
		entry("1.4.0", "sub/dir/app-1.4.0.tgz", "")
		b.WriteString("  many:\n")
		for i := range 15 {
			fmt.Fprintf(&b, "  - {apiVersion: v2, name: many, version: 0.%d.0, urls: [many.tgz]}\n", i)
		}
		b.WriteString("  invalid:\n  - {apiVersion: v2, name: invalid, version: not-semver, urls: [x.tgz]}\n")
		_, _ = w.Write([]byte(b.String()))
	})
	serve := func(data []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(data) }
	}
	mux.Handle("/charts/app-1.0.0.tgz", serve(archives["1.0.0"]))
	mux.Handle("/elsewhere/app-1.1.0.tgz", serve(archives["1.1.0"]))
	mux.Handle("/charts/app-1.2.0.tgz", serve(archives["1.2.0"]))
	mux.Handle("/charts/sub/dir/app-1.4.0.tgz", serve(archives["1.4.0"]))
	mux.HandleFunc("/big/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		// No Content-Length: the limit holds while streaming.
		w.(http.Flusher).Flush()
		for range 100 {
			_, _ = w.Write([]byte(strings.Repeat("#", 1024) + "\n"))
		}
	})
	mux.HandleFunc("/broken/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "oops", http.StatusInternalServerError)
	})
	if tls {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return srv
}

func TestRepoSource(t *testing.T) {
	ctx := context.Background()
	srv := repoServer(t, false)
	url := srv.URL + "/charts"
	src, err := NewSource(url, SourceOptions{})
	require.NoError(t, err)
	assert.Equal(t, url, src.String())

	versions, err := src.Versions(ctx, "app")
	require.NoError(t, err)
	assert.Equal(t, []string{"1.4.0", "1.3.0", "1.2.0", "1.1.0", "1.0.0"}, versions)

	for _, v := range []string{"1.0.0", "1.1.0", "1.4.0", "v1.0.0"} {
		c, err := src.Load(ctx, "app", v)
		require.NoError(t, err, v)
		assert.Equal(t, strings.TrimPrefix(v, "v"), c.Metadata.Version)
		assert.Equal(t, strings.TrimPrefix(v, "v"), c.Values["version"])
	}

	_, err = src.Load(ctx, "app", "1.2.0")
	require.Error(t, err)
	assert.ErrorContains(t, err, "chart archive "+url+"/app-1.2.0.tgz: sha256 digest")
	assert.ErrorContains(t, err, "does not match")

	_, err = src.Load(ctx, "app", "1.3.0")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "fetching "+url+"/app-1.3.0.tgz: HTTP 404 Not Found")

	_, err = src.Load(ctx, "app", "2.0.0")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, `chart app version "2.0.0" not found in `+url+"; available: 1.4.0, 1.3.0, 1.2.0, 1.1.0, 1.0.0")

	_, err = src.Load(ctx, "many", "9.0.0")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "available: 0.14.0, 0.13.0, 0.12.0, 0.11.0, 0.10.0, 0.9.0, 0.8.0, 0.7.0, 0.6.0, 0.5.0 (and 5 more)")

	_, err = src.Versions(ctx, "nope")
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, `chart "nope" not found in `+url+"; charts there: app, invalid, many")

	_, err = src.Versions(ctx, "invalid") // Helm drops invalid entries
	require.ErrorIs(t, err, outcome.ErrBadInput)

	latest, err := Latest(ctx, src, "app", "~1.1", false)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", latest)
}

func TestRepoSourceErrors(t *testing.T) {
	ctx := context.Background()
	srv := repoServer(t, false)

	t.Run("no index", func(t *testing.T) {
		src, err := NewSource(srv.URL+"/nothing/", SourceOptions{})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, "fetching "+srv.URL+"/nothing/index.yaml: HTTP 404 Not Found")
	})
	t.Run("server error", func(t *testing.T) {
		src, err := NewSource(srv.URL+"/broken", SourceOptions{})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.Error(t, err)
		assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "worth a retry")
		assert.ErrorContains(t, err, "HTTP 500")
	})
	t.Run("index too large", func(t *testing.T) {
		src, err := NewSource(srv.URL+"/big", SourceOptions{MaxIndexBytes: 10 << 10})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.ErrorIs(t, err, errTooLarge)
		assert.ErrorContains(t, err, "fetching "+srv.URL+"/big/index.yaml: the response is larger than the limit of 10 KiB")
	})
	t.Run("index too large by Content-Length", func(t *testing.T) {
		src, err := NewSource(srv.URL+"/charts", SourceOptions{MaxIndexBytes: 100})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.ErrorIs(t, err, errTooLarge)
		assert.ErrorContains(t, err, "larger than the limit of 100 bytes")
	})
	t.Run("archive too large", func(t *testing.T) {
		src, err := NewSource(srv.URL+"/charts", SourceOptions{MaxArchiveBytes: 100})
		require.NoError(t, err)
		_, err = src.Load(ctx, "app", "1.0.0")
		require.ErrorIs(t, err, errTooLarge)
		assert.ErrorContains(t, err, "fetching "+srv.URL+"/charts/app-1.0.0.tgz: the response is larger than the limit of 100 bytes")
	})
	t.Run("not an index", func(t *testing.T) {
		src, err := NewSource(srv.URL+"/big", SourceOptions{})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, "reading repository index "+srv.URL+"/big/index.yaml")
	})
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		src, err := NewSource(srv.URL+"/charts", SourceOptions{})
		require.NoError(t, err)
		_, err = src.Versions(cctx, "app")
		require.ErrorIs(t, err, context.Canceled)
		// A failure is not remembered.
		_, err = src.Versions(ctx, "app")
		require.NoError(t, err)
	})
	t.Run("credentials are not printed", func(t *testing.T) {
		u := strings.Replace(srv.URL, "http://", "http://user:secret@", 1) + "/nothing"
		src, err := NewSource(u, SourceOptions{})
		require.NoError(t, err)
		assert.NotContains(t, src.String(), "secret")
		_, err = src.Versions(ctx, "app")
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "secret")
	})
}

func TestRepoSourceTLS(t *testing.T) {
	ctx := context.Background()
	srv := repoServer(t, true)
	url := srv.URL + "/charts"

	t.Run("untrusted by default", func(t *testing.T) {
		src, err := NewSource(url, SourceOptions{})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.Error(t, err)
		assert.ErrorContains(t, err, "certificate")
	})
	t.Run("CA file", func(t *testing.T) {
		ca := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
		src, err := NewSource(url, SourceOptions{CAFile: ca})
		require.NoError(t, err)
		c, err := src.Load(ctx, "app", "1.0.0")
		require.NoError(t, err)
		assert.Equal(t, "app", c.Name())
	})
	t.Run("no redirect to plain http", func(t *testing.T) {
		plain := repoServer(t, false)
		redirect := httptest.NewTLSServer(http.RedirectHandler(plain.URL+"/charts/index.yaml", http.StatusFound))
		t.Cleanup(redirect.Close)
		ca := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: redirect.Certificate().Raw}), 0o600))
		src, err := NewSource(redirect.URL, SourceOptions{CAFile: ca})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.Error(t, err)
		assert.ErrorContains(t, err, "refusing a redirect from https to "+plain.URL)
	})
	t.Run("own client", func(t *testing.T) {
		src, err := NewSource(url, SourceOptions{HTTPClient: srv.Client()})
		require.NoError(t, err)
		_, err = src.Versions(ctx, "app")
		require.NoError(t, err)
	})
	t.Run("bad options", func(t *testing.T) {
		transport := srv.Client().Transport.(*http.Transport).Clone()
		transport.TLSClientConfig.InsecureSkipVerify = true
		insecure := &http.Client{Transport: transport}
		notPEM := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(notPEM, []byte("nope"), 0o600))
		for name, opts := range map[string]SourceOptions{
			"insecure client":   {HTTPClient: insecure},
			"client and CA":     {HTTPClient: srv.Client(), CAFile: notPEM},
			"CA file not PEM":   {CAFile: notPEM},
			"CA file not there": {CAFile: filepath.Join(t.TempDir(), "missing.pem")},
		} {
			_, err := NewSource(url, opts)
			require.ErrorIs(t, err, outcome.ErrBadInput, name)
		}
	})
}
