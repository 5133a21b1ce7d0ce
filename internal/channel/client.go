package channel

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// userAgent identifies chart-upgrader to channel servers.
const userAgent = "chart-upgrader"

// newClient returns an HTTP client that never follows redirects and verifies
// TLS against the system roots plus the certificates in caFile. The caller
// closes its idle connections when done.
func newClient(caFile string) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := caPool(caFile)
		if err != nil {
			return nil, err
		}
		tlsConfig.RootCAs = pool
	}
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		transport = t.Clone()
	}
	transport.TLSClientConfig = tlsConfig
	return &http.Client{
		Transport: transport,
		// SUC reads the redirect itself; following it would lose the version.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// caPool returns the system roots plus the PEM certificates in file.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("reading CA file: %w", err))
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, outcome.BadInput(fmt.Errorf("CA file %q holds no PEM certificate", file))
	}
	return pool, nil
}

// maxRedirects bounds the redirects a repository client follows.
const maxRedirects = 10

// repoClient returns the HTTP client a Server reads its repository with,
// kept across refreshes so connections are reused: TLS verified against the
// system roots plus caFile, redirects followed but never from https to http.
func repoClient(caFile string) (*http.Client, error) {
	client, err := newClient(caFile)
	if err != nil {
		return nil, err
	}
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("refusing a redirect from https to %s", req.URL.Redacted())
		}
		return nil
	}
	return client, nil
}
