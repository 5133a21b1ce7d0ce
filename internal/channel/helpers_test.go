package channel

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fast are Options for tests: quick retries, short bounds.
func fast() Options {
	return Options{Backoff: time.Millisecond, AttemptTimeout: 5 * time.Second, Timeout: 20 * time.Second}
}

// serve starts a loopback HTTP server running h and counts its requests.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// writeCA writes the certificate of a TLS test server to a PEM file.
func writeCA(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(file, data, 0o600))
	return file
}

// repo is a Helm repository served on loopback whose index can change, fail
// or stall while a test runs.
type repo struct {
	srv *httptest.Server

	mu       sync.Mutex
	versions map[string][]string // chart → versions
	status   int                 // answer with this status instead of the index when not 0
	delay    time.Duration       // wait before answering
	gate     chan struct{}       // when not nil, wait for it to close before answering
	hits     atomic.Int64
}

func newRepo(t testing.TB, tls bool, chart string, versions ...string) *repo {
	t.Helper()
	r := &repo{versions: map[string][]string{chart: versions}}
	if tls {
		r.srv = httptestTLS(t, r.serveHTTP)
	} else {
		r.srv = httptest.NewServer(http.HandlerFunc(r.serveHTTP))
		t.Cleanup(r.srv.Close)
	}
	return r
}

func (r *repo) URL() string { return r.srv.URL + "/charts" }

func (r *repo) set(chart string, versions ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions[chart] = versions
}

// only makes chart the one chart of the repository.
func (r *repo) only(chart string, versions ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions = map[string][]string{chart: versions}
}

func (r *repo) fail(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// hold makes answers wait until the returned function is called.
func (r *repo) hold() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gate := make(chan struct{})
	r.gate = gate
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

func (r *repo) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/charts/index.yaml" {
		http.NotFound(w, req)
		return
	}
	r.hits.Add(1)
	r.mu.Lock()
	status, delay, gate := r.status, r.delay, r.gate
	var b strings.Builder
	b.WriteString("apiVersion: v1\nentries:\n")
	for chart, versions := range r.versions {
		fmt.Fprintf(&b, "  %s:\n", chart)
		for _, v := range versions {
			fmt.Fprintf(&b, "  - {apiVersion: v2, name: %s, version: %q, urls: [%s-%s.tgz]}\n", chart, v, chart, v)
		}
	}
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-req.Context().Done():
			return
		}
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	if status != 0 {
		http.Error(w, "repository trouble", status)
		return
	}
	_, _ = w.Write([]byte(b.String()))
}

// eventually calls check until it returns true, failing the test after
// deadline.
func eventually(t *testing.T, deadline time.Duration, what string, check func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !check() {
		select {
		case <-ctx.Done():
			t.Fatalf("after %s: %s", deadline, what)
		case <-tick.C:
		}
	}
}

// httptestTLS starts a loopback HTTPS server running h.
func httptestTLS(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// writeFile writes body to file, making its directory, and returns file.
func writeFile(t *testing.T, file, body string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
	return file
}
