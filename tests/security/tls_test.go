package security

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/channel"
)

// tlsServer serves h over TLS on loopback with a self-signed certificate,
// and returns it with a PEM file of that certificate (for --ca-file).
func tlsServer(t *testing.T, h http.Handler) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, writeFile(t, filepath.Join(t.TempDir(), "ca.pem"), string(ca))
}

// Every HTTP client of chart-upgrader verifies TLS: a server with a
// self-signed certificate is refused unless its certificate is given as a
// CA file, and accepted with it. There is no flag to skip verification.
func TestTLSVerifiedByDefault(t *testing.T) {
	w := newWorld(t)
	name := w.install(example.UserValues())
	ref := "managedchart/" + w.ns + "/" + name

	mux := http.NewServeMux()
	mux.Handle("/repo/", http.StripPrefix("/repo", w.repo(nil, nil)))
	mux.HandleFunc("/v1/channels/stable", func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, "/releases/v2.0.0", http.StatusFound)
	})
	srv, caFile := tlsServer(t, mux)
	untrusted := "certificate"

	t.Run("chart repository source (upgrade, preflight)", func(t *testing.T) {
		for _, command := range []string{"preflight", "upgrade"} {
			r := w.cli(true, command, "--target", ref, "--chart-source", srv.URL+"/repo", "--version", "2.0.0", "--timeout", "60s")
			assert.Equal(t, 2, r.code, "%s without --ca-file: stderr:\n%s", command, r.stderr)
			assert.Contains(t, r.stderr, untrusted)
			assert.Contains(t, r.stderr, srv.URL+"/repo/index.yaml")
		}
		r := w.cli(true, "preflight", "--target", ref, "--chart-source", srv.URL+"/repo", "--version", "2.0.0", "--ca-file", caFile)
		assert.Equal(t, 0, r.code, "preflight with --ca-file: stderr:\n%s", r.stderr)
	})

	t.Run("channel resolve", func(t *testing.T) {
		r := w.cli(false, "resolve", "--channel", srv.URL+"/v1/channels/stable")
		assert.Equal(t, 2, r.code, "stderr:\n%s", r.stderr)
		assert.Contains(t, r.stderr, untrusted)
		r = w.cli(false, "resolve", "--channel", srv.URL+"/v1/channels/stable", "--ca-file", caFile)
		require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
		assert.Equal(t, "v2.0.0\n", r.stdout)
	})

	t.Run("repository resolve", func(t *testing.T) {
		r := w.cli(false, "resolve", "--repo", srv.URL+"/repo", "--chart", "demo-app")
		assert.Equal(t, 2, r.code, "stderr:\n%s", r.stderr)
		assert.Contains(t, r.stderr, untrusted)
		r = w.cli(false, "resolve", "--repo", srv.URL+"/repo", "--chart", "demo-app", "--ca-file", caFile)
		require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
		assert.Equal(t, "2.0.0\n", r.stdout)
	})

	t.Run("channel server upstream", func(t *testing.T) {
		for _, tc := range []struct {
			name, caFile string
			code         int
			want         string
		}{
			{"without caFile", "", http.StatusServiceUnavailable, untrusted},
			{"with caFile", caFile, http.StatusFound, "/2.0.0"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := "source: " + srv.URL + "/repo\nchart: demo-app\nchannels: {stable: '*'}\n"
				if tc.caFile != "" {
					cfg += "caFile: " + tc.caFile + "\n"
				}
				code, body, location := channelAnswer(t, cfg, "/v1/channels/stable")
				assert.Equal(t, tc.code, code, body)
				assert.Contains(t, body+location, tc.want)
			})
		}
	})
}

// channelAnswer runs a channel server of the configuration cfg (as
// `channel serve` reads it) and returns its answer to a GET of path.
func channelAnswer(t *testing.T, cfg, path string) (code int, body, location string) {
	t.Helper()
	c, err := channel.ParseConfig(writeFile(t, filepath.Join(t.TempDir(), "channels.yaml"), cfg), []byte(cfg))
	require.NoError(t, err)
	s, err := channel.NewServer(*c, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.Start(ctx)
	front := httptest.NewServer(s)
	defer front.Close()
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(front.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(data)), resp.Header.Get("Location")
}
