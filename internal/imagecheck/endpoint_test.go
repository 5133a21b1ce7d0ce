package imagecheck_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/imagecheck"
)

// A first endpoint that accepts connections and never answers costs one
// timeout for the whole run, not one per image: 40 images asked at once
// through it reach it over one connection, and each is then found on the
// next endpoint.
func TestADeadEndpointIsAskedOnce(t *testing.T) {
	w := newWorld(t)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int64
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		dead.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	more := fmt.Sprintf("mirrors:\n  registry.example.invalid:\n    endpoint: [\"https://%s\", \"https://%s\"]\n", dead.Addr(), w.mirror.Host)
	p := imagecheck.NewPuller(w.registries(t, more), 500*time.Millisecond)
	defer p.Close()
	var wg sync.WaitGroup
	results := make([][]string, 40)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 40 images: the same repository at 40 references, each asked
			// of the dead host (an answer is per image, not per host)
			ref := "registry.example.invalid/app:2.0.0"
			if i > 0 {
				ref = fmt.Sprintf("registry.example.invalid/app:v%d", i)
			}
			results[i] = answers(pull(t, p, ref, nil))
		}()
	}
	wg.Wait()
	// its first question's: go-containerregistry pings a loopback host
	// over https and http at once, and both come here as https
	assert.LessOrEqual(t, accepted.Load(), int64(2), "the dead host is asked once, not once per image")
	require.Len(t, results[0], 2, "%v", results[0])
	assert.Contains(t, results[0][0], "no answer within 500ms")
	assert.Contains(t, results[0][1], "found linux/amd64")
	for i, r := range results[1:] {
		require.Len(t, r, 3, "image %d: %v", i+1, r)
		assert.Contains(t, r[0], "no answer within 500ms")
		assert.Contains(t, r[1], "MANIFEST_UNKNOWN", "image %d asked of the next endpoint", i+1)
	}
}

// A mirror served under a path (a proxy cache at https://host/prefix)
// whose root answers 404, as containerd reaches it: the path is the API
// root, and no /v2/ ping is sent.
func TestAMirrorUnderAPath(t *testing.T) {
	w := newWorld(t)
	origin, err := url.Parse("https://" + w.origin.Host)
	require.NoError(t, err)
	ca, err := os.ReadFile(w.origin.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	proxy := httputil.NewSingleHostReverseProxy(origin)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path)
		mu.Unlock()
		rest, ok := strings.CutPrefix(r.URL.Path, "/prefix/")
		if !ok {
			http.NotFound(rw, r) // its root is no registry
			return
		}
		r.URL.Path = "/v2/" + rest
		r.Host = origin.Host
		proxy.ServeHTTP(rw, r)
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "proxy-ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	host := strings.TrimPrefix(srv.URL, "https://")
	more := fmt.Sprintf("  %q:\n    tls:\n      ca_file: %s\nmirrors:\n  registry.example.invalid:\n    endpoint: [\"https://%s/prefix\"]\n", host, caFile, host)
	p := imagecheck.NewPuller(w.registries(t, more), 0)
	defer p.Close()
	got := answers(pull(t, p, "registry.example.invalid/app:2.0.0", nil))
	require.NotEmpty(t, got)
	assert.Equal(t, host+" app: found linux/amd64,linux/arm64", got[0])
	mu.Lock()
	defer mu.Unlock()
	for _, a := range asked {
		assert.True(t, strings.HasPrefix(a, "HEAD /prefix/") || strings.HasPrefix(a, "GET /prefix/"), "only under the API root: %s", a)
	}
}
