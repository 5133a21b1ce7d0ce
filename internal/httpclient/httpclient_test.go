package httpclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// tlsServer serves h over TLS on loopback with httptest's certificate.
func tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// otherCA writes a PEM file of a fresh self-signed CA certificate, one that
// signed none of the test servers' certificates.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "other CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "other-ca.pem")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return file
}

// caFile writes the certificate of srv to a PEM file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(file, data, 0o600))
	return file
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	if err == nil {
		t.Cleanup(func() { Drain(resp.Body) })
	}
	return resp, err
}

func TestNewTLS(t *testing.T) {
	srv := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }))

	t.Run("CA file trusted", func(t *testing.T) {
		c, err := New(Options{CAFile: caFile(t, srv)})
		require.NoError(t, err)
		defer c.CloseIdleConnections()
		resp, err := get(t, c, srv.URL)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := ReadAll(resp, 100)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(body))
		require.NotNil(t, resp.TLS, "answered over TLS")
		assert.GreaterOrEqual(t, resp.TLS.Version, uint16(0x0303), "TLS 1.2 or later")
	})
	t.Run("no CA file: the certificate is not trusted", func(t *testing.T) {
		c, err := New(Options{})
		require.NoError(t, err)
		defer c.CloseIdleConnections()
		_, err = get(t, c, srv.URL)
		require.Error(t, err)
		assert.True(t, Untrusted(err), "not recognised as untrusted: %v", err)
		assert.ErrorContains(t, err, "x509")
	})
	t.Run("another CA file: still not trusted", func(t *testing.T) {
		c, err := New(Options{CAFile: otherCA(t)})
		require.NoError(t, err)
		defer c.CloseIdleConnections()
		_, err = get(t, c, srv.URL)
		require.Error(t, err)
		assert.True(t, Untrusted(err), "not recognised as untrusted: %v", err)
	})
	t.Run("CA file that is not PEM", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(file, []byte("not a certificate\n"), 0o600))
		_, err := New(Options{CAFile: file})
		require.ErrorIs(t, err, outcome.ErrBadInput)
		assert.EqualError(t, err, `CA file "`+file+`" holds no PEM certificate`)
	})
	t.Run("CA file holding a PEM block that is no certificate", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "key.pem")
		require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")}), 0o600))
		_, err := New(Options{CAFile: file})
		require.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, file)
	})
	t.Run("missing CA file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "missing.pem")
		_, err := New(Options{CAFile: file})
		require.ErrorIs(t, err, outcome.ErrBadInput)
		require.ErrorIs(t, err, os.ErrNotExist)
		assert.ErrorContains(t, err, "reading CA file: ")
		assert.ErrorContains(t, err, file)
	})
	t.Run("options", func(t *testing.T) {
		c, err := New(Options{Timeout: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, time.Minute, c.Timeout)
		assert.True(t, Verifies(c))
		tr := c.Transport.(*http.Transport)
		assert.Equal(t, uint16(0x0303), tr.TLSClientConfig.MinVersion, "TLS 1.2 at least")
		assert.False(t, tr.TLSClientConfig.InsecureSkipVerify)
		assert.NotNil(t, tr.Proxy, "the proxy from the environment")
	})
}

func TestRedirects(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "plain") }))
	t.Cleanup(plain.Close)
	var srv *httptest.Server
	srv = tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/to-http":
			http.Redirect(w, r, plain.URL+"/x", http.StatusFound)
		case r.URL.Path == "/to-https":
			http.Redirect(w, r, srv.URL+"/end", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/loop/"):
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/loop/"))
			http.Redirect(w, r, srv.URL+"/loop/"+strconv.Itoa(n+1), http.StatusFound)
		default:
			_, _ = io.WriteString(w, "end")
		}
	}))
	ca := caFile(t, srv)

	follow, err := New(Options{CAFile: ca})
	require.NoError(t, err)
	defer follow.CloseIdleConnections()
	resp, err := get(t, follow, srv.URL+"/to-https")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "/end", resp.Request.URL.Path)

	_, err = get(t, follow, srv.URL+"/to-http")
	require.Error(t, err)
	assert.ErrorContains(t, err, "refusing a redirect from https to "+plain.URL+"/x")

	_, err = get(t, follow, srv.URL+"/loop/0")
	require.Error(t, err)
	assert.ErrorContains(t, err, "stopped after 10 redirects")

	nofollow, err := New(Options{CAFile: ca, Redirects: NoFollow})
	require.NoError(t, err)
	defer nofollow.CloseIdleConnections()
	resp, err = get(t, nofollow, srv.URL+"/to-http")
	require.NoError(t, err)
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, plain.URL+"/x", resp.Header.Get("Location"))
}

func TestReadAll(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("chunked") != "" {
			w.(http.Flusher).Flush() // no Content-Length
		}
		_, _ = io.WriteString(w, strings.Repeat("a", n))
	}))
	t.Cleanup(srv.Close)
	c := srv.Client()
	for _, tc := range []struct {
		query string
		max   int64
		ok    bool
	}{
		{"n=10", 10, true},
		{"n=11", 10, false},
		{"n=10&chunked=1", 10, true},
		{"n=11&chunked=1", 10, false},
		{"n=0", 0, true},
	} {
		resp, err := get(t, c, srv.URL+"/?"+tc.query)
		require.NoError(t, err)
		data, err := ReadAll(resp, tc.max)
		if tc.ok {
			require.NoError(t, err, tc.query)
			assert.Len(t, data, int(tc.max), tc.query)
		} else {
			require.ErrorIs(t, err, ErrTooLarge, tc.query)
		}
	}
}

func TestScrub(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens there any more
	c, err := New(Options{})
	require.NoError(t, err)
	_, err = get(t, c, "http://"+addr+"/index.yaml?token=s3cret")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "s3cret", "net/http keeps the URL in its error")
	assert.NotContains(t, Scrub(err).Error(), "s3cret")
	assert.False(t, Untrusted(err))

	plain := errors.New("plain")
	assert.Equal(t, plain, Scrub(plain))
}

func TestVerifies(t *testing.T) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	assert.True(t, Verifies(&http.Client{Transport: tr}))
	assert.True(t, Verifies(&http.Client{}), "the default transport verifies")
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the client Verifies must refuse
	assert.False(t, Verifies(&http.Client{Transport: tr}))
}
