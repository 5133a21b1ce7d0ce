// Package httpclient builds, in one place, the HTTP clients chart-upgrader
// reaches chart repositories, SUC channels and image registries with: TLS
// 1.2 or later, always verified against the system roots plus an optional
// CA file (there is no way to skip verification but a node's own
// insecure_skip_verify, for the image check: NodeTransport), the proxy
// from the environment, an optional
// timeout, and one of two redirect policies. It also holds what every user of
// those clients needs: a bounded read of a response body, telling an
// untrusted certificate from other errors, and dropping the URL (which may
// hold credentials) from a client error.
package httpclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// UserAgent identifies chart-upgrader to repositories and channel servers.
const UserAgent = "chart-upgrader"

// MaxRedirects bounds the redirects a FollowSecure client follows.
const MaxRedirects = 10

// Redirects says what a client does with a redirect.
type Redirects int

const (
	// FollowSecure follows up to MaxRedirects redirects, never from https
	// to http: for reading repositories.
	FollowSecure Redirects = iota
	// NoFollow returns a redirect as the response: for SUC channels, whose
	// answer is the redirect itself.
	NoFollow
)

// Options configures New. The zero value is a client that verifies TLS
// against the system roots, has no timeout and follows secure redirects.
type Options struct {
	// CAFile names a PEM file of certificate authorities trusted besides
	// the system roots; "" adds none.
	CAFile string
	// Timeout bounds each request, reading the body included; 0 sets none
	// (the request's context still applies).
	Timeout time.Duration
	// Redirects is the redirect policy.
	Redirects Redirects
}

// New returns a client for opts. A CA file that cannot be read or holds no
// PEM certificate is an outcome.BadInput error naming the file. The caller
// closes the client's idle connections when done with it.
func New(opts Options) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pool, err := CertPool(opts.CAFile)
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
	client := &http.Client{Transport: transport, Timeout: opts.Timeout, CheckRedirect: followSecure}
	if opts.Redirects == NoFollow {
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return client, nil
}

// CertPool returns the system roots (none when the system has no pool) plus
// the PEM certificates in file. A file that cannot be read or holds no PEM
// certificate is an outcome.BadInput error naming it.
func CertPool(file string) (*x509.CertPool, error) {
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

// followSecure follows at most MaxRedirects redirects and never from https
// to http.
func followSecure(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing a redirect from https to %s", req.URL.Redacted())
	}
	return nil
}

// Verifies tells whether c verifies TLS certificates, as far as can be
// seen: false when its transport is an *http.Transport that skips
// verification.
func Verifies(c *http.Client) bool {
	t, ok := c.Transport.(*http.Transport)
	return !ok || t.TLSClientConfig == nil || !t.TLSClientConfig.InsecureSkipVerify
}

// Untrusted tells whether err is a failed TLS certificate verification:
// asking again will not help, a CA file might.
func Untrusted(err error) bool {
	var verr *tls.CertificateVerificationError
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	var cerr x509.CertificateInvalidError
	return errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr)
}

// Scrub drops the URL, which may hold credentials, from a client error; the
// caller names the URL itself, redacted.
func Scrub(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// ErrTooLarge is returned by ReadAll for a body larger than its limit.
var ErrTooLarge = errors.New("response larger than the limit")

// ReadAll reads the body of resp, at most max bytes. A body that says or
// turns out to be larger is ErrTooLarge, found without reading more than
// max+1 bytes. It does not close the body.
func ReadAll(resp *http.Response, max int64) ([]byte, error) {
	if resp.ContentLength > max {
		return nil, ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, ErrTooLarge
	}
	return data, nil
}

// maxDrain is the most of a body Drain reads.
const maxDrain = 64 << 10

// Drain reads at most 64 KiB of body, so that a small answer leaves its
// connection reusable while a large one closes it, and closes body.
func Drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain))
	_ = body.Close()
}

// NodeTLS is how a node's containerd reaches one registry host, from its
// registries.yaml: a CA file trusted besides the system roots, a client
// certificate and key, and whether it skips verification. The files must
// have been read already (CA, Certificate).
type NodeTLS struct {
	CA          *x509.CertPool // nil: the system roots
	Certificate *tls.Certificate
	// SkipVerify is the node's insecure_skip_verify: the only way a client
	// of this package skips verification, so that a check of what the
	// node can pull sees what the node sees.
	SkipVerify bool
	// Proxy, when set, is the proxy the node's containerd pulls through,
	// for each request's URL (httpproxy.Config.ProxyFunc: nil is
	// direct); nil is this process's environment's (ProxyFromEnvironment).
	Proxy func(*url.URL) (*url.URL, error)
}

// NodeTransport is a transport that reaches a registry host as the node
// does (t): through the node's proxy (t.Proxy) when it has one, else with
// the proxy from this process's environment; the caller closes its idle
// connections when done with it.
//
// The node's proxy, when known, is the only one: containerd never sees
// this process's environment, so a proxy this process runs behind is not
// the node's way out, and one the node's NO_PROXY names is dialed
// directly. Without it the environment's is kept, as before the node's
// was read: a run off the node (a workstation, --registries-config) reaches
// registries the way its operator does, and a node whose proxy is set
// where the tool does not look (a systemd drop-in, the manager's
// DefaultEnvironment) may be matched by the job's own environment.
func NodeTransport(t NodeTLS) *http.Transport {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: t.CA, InsecureSkipVerify: t.SkipVerify} //nolint:gosec // the node's own setting, see NodeTLS
	if t.Certificate != nil {
		tlsConfig.Certificates = []tls.Certificate{*t.Certificate}
	}
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if d, ok := http.DefaultTransport.(*http.Transport); ok {
		transport = d.Clone()
	}
	transport.TLSClientConfig = tlsConfig
	if t.Proxy != nil {
		proxy := t.Proxy
		transport.Proxy = func(req *http.Request) (*url.URL, error) { return proxy(req.URL) }
	}
	return transport
}
