package kubelet

// A minimal containerd fetch of one image's manifest from one host
// (core/remotes/docker resolver.go, authorizer.go, httpFallback;
// config/hosts.go for TLS): the manifest by digest or tag, with the
// manifest types in Accept and no /v2/ ping first; a Basic challenge
// answered once with the host's credentials; for an image manifest, its
// config, which says its platform. No layer is fetched.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/platforms"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The priorities of containerd's resolve errors: it reports the first
// error of the highest priority any host gave.
const (
	prioOther    = 1 // a connection, a credential refused
	prioNotFound = 2 // 404
	prioStatus   = 3 // any other 4xx or 5xx
	prioTooLarge = 4
)

// The media types of manifests (containerd's resolve Accept header).
const (
	mediaDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mediaDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mediaOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mediaDockerSchema1  = "application/vnd.docker.distribution.manifest.v1+prettyjws"
)

var acceptManifests = strings.Join([]string{mediaDockerManifest, mediaDockerList, mediaOCIManifest, mediaOCIIndex, "*/*"}, ", ")

// maxManifest is containerd's MaxManifestSize.
const maxManifest = 4 * 1048 * 1048

// requestTimeout bounds each request (containerd has none but its
// dial's; a test must not hang).
const requestTimeout = 30 * time.Second

// errInvalidAuthorization is containerd's ErrInvalidAuthorization.
var errInvalidAuthorization = errors.New("authorization failed")

// fetcher asks hosts for one pull.
type fetcher struct {
	n   *node
	cri authn.Authenticator
	// authorization is the Authorization header of each request host
	// whose challenge was answered (containerd's authorizer handlers).
	authorization map[string]string
	transports    []*http.Transport
}

func newFetcher(n *node, cri authn.Authenticator) *fetcher {
	return &fetcher{n: n, cri: cri, authorization: map[string]string{}}
}

func (f *fetcher) close() {
	for _, t := range f.transports {
		t.CloseIdleConnections()
	}
}

// client is h's HTTP client, with h's TLS: its CA files added to the
// system's, its client certificate, its skip_verify. A file that does
// not load fails the pull before any host is asked, as in containerd.
func (f *fetcher) client(h host) (*http.Client, error) {
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     &tls.Config{},
	}
	if h.explicit {
		c := t.TLSClientConfig
		c.InsecureSkipVerify = h.tls.InsecureSkipVerify
		if h.tls.CAFile != "" {
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			data, err := os.ReadFile(h.tls.CAFile)
			if err != nil {
				return nil, fmt.Errorf("unable to read CA cert %q: %w", h.tls.CAFile, err)
			}
			if !pool.AppendCertsFromPEM(data) {
				return nil, fmt.Errorf("unable to load CA cert %q", h.tls.CAFile)
			}
			c.RootCAs = pool
		}
		if h.tls.CertFile != "" || h.tls.KeyFile != "" {
			key := h.tls.KeyFile
			if key == "" {
				key = h.tls.CertFile
			}
			cert, err := tls.LoadX509KeyPair(h.tls.CertFile, key)
			if err != nil {
				return nil, fmt.Errorf("failed to load X509 key pair: %w", err)
			}
			c.Certificates = append(c.Certificates, cert)
		}
	}
	f.transports = append(f.transports, t)
	return &http.Client{Transport: t}, nil
}

// stopError is an answer after which containerd asks no other host.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// manifest asks h for img's manifest, and the platforms it holds.
func (f *fetcher) manifest(ctx context.Context, h host, c *http.Client, img image) answer {
	a := answer{h: h, priority: prioOther}
	resp, u, err := f.get(ctx, h, c, img, acceptManifests, "manifests", img.object)
	a.url = u
	if err != nil {
		if errors.Is(err, errInvalidAuthorization) {
			err = fmt.Errorf("pull access denied, repository does not exist or may require authorization: %w", err)
		}
		a.err = err
		return a
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		a.err, a.priority = fmt.Errorf("%s: not found", img.ref), prioNotFound
		return a
	case resp.StatusCode > 399:
		a.err, a.priority = unexpected(resp, u), prioStatus
		return a
	case resp.StatusCode > 299:
		a.err, a.priority = &stopError{unexpected(resp, u)}, prioStatus
		return a
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	if err != nil {
		a.err = err
		return a
	}
	if len(body) > maxManifest {
		a.err, a.priority = fmt.Errorf("rejecting %d+ byte manifest for %s: not found", maxManifest, img.ref), prioTooLarge
		return a
	}
	a.platforms, a.err = f.platformsOf(ctx, h, c, img, mediaTypeOf(resp, body), body)
	return a
}

// platformsOf is what a manifest says of its platforms: an index, each
// of its manifests' (a manifest with none, its config's); an image
// manifest, its config's.
func (f *fetcher) platformsOf(ctx context.Context, h host, c *http.Client, img image, mediaType string, body []byte) ([]platforms.Platform, error) {
	switch mediaType {
	case mediaOCIIndex, mediaDockerList:
		var idx v1.IndexManifest
		if err := json.Unmarshal(body, &idx); err != nil {
			return nil, fmt.Errorf("decoding the index: %w", err)
		}
		var out []platforms.Platform
		for _, m := range idx.Manifests {
			if m.Platform != nil {
				out = append(out, platformOf(m.Platform.OS, m.Platform.Architecture, m.Platform.Variant, m.Platform.OSVersion))
				continue
			}
			if mt := string(m.MediaType); mt != mediaOCIManifest && mt != mediaDockerManifest {
				continue
			}
			p, err := f.childPlatform(ctx, h, c, img, m.Digest.String())
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	case mediaOCIManifest, mediaDockerManifest:
		p, err := f.configPlatform(ctx, h, c, img, body)
		if err != nil {
			return nil, err
		}
		return []platforms.Platform{p}, nil
	case mediaDockerSchema1, "application/vnd.docker.distribution.manifest.v1+json":
		return nil, fmt.Errorf("media type %q is no longer supported since containerd v2.0", mediaType)
	}
	return nil, fmt.Errorf("a manifest of media type %q", mediaType)
}

// childPlatform is the platform of the image manifest digest of an
// index that does not say it.
func (f *fetcher) childPlatform(ctx context.Context, h host, c *http.Client, img image, digest string) (platforms.Platform, error) {
	body, err := f.fetch(ctx, h, c, img, acceptManifests, "manifests", digest)
	if err != nil {
		return platforms.Platform{}, err
	}
	return f.configPlatform(ctx, h, c, img, body)
}

// configPlatform is the platform the config of an image manifest says.
func (f *fetcher) configPlatform(ctx context.Context, h host, c *http.Client, img image, manifest []byte) (platforms.Platform, error) {
	var m v1.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return platforms.Platform{}, fmt.Errorf("decoding the manifest: %w", err)
	}
	body, err := f.fetch(ctx, h, c, img, string(m.Config.MediaType)+", */*", "blobs", m.Config.Digest.String())
	if err != nil {
		return platforms.Platform{}, err
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(body, &cfg); err != nil {
		return platforms.Platform{}, fmt.Errorf("decoding the image config: %w", err)
	}
	return platformOf(cfg.OS, cfg.Architecture, cfg.Variant, cfg.OSVersion), nil
}

func platformOf(os, arch, variant, osVersion string) platforms.Platform {
	return platforms.Platform{OS: os, Architecture: arch, Variant: variant, OSVersion: osVersion}
}

// fetch is the body of what on h, which must answer 200.
func (f *fetcher) fetch(ctx context.Context, h host, c *http.Client, img image, accept string, what ...string) ([]byte, error) {
	resp, u, err := f.get(ctx, h, c, img, accept, what...)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, unexpected(resp, u)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxManifest))
}

// get GETs what on h, answering a Basic challenge once with the host's
// credentials (a second 401 is the answer). A Bearer challenge is not
// answered: the test registries use htpasswd.
func (f *fetcher) get(ctx context.Context, h host, c *http.Client, img image, accept string, what ...string) (*http.Response, string, error) {
	for answered := false; ; answered = true {
		resp, u, err := f.send(ctx, h, c, img, accept, what...)
		if err != nil {
			return nil, u, fmt.Errorf("failed to do request: %w", err)
		}
		if resp.StatusCode != http.StatusUnauthorized || answered {
			return resp, u, nil
		}
		challenge := resp.Header.Get("WWW-Authenticate")
		scheme, _, _ := strings.Cut(strings.TrimSpace(challenge), " ")
		switch strings.ToLower(scheme) {
		case "basic":
			resp.Body.Close()
			user, secret, err := f.n.credentials(f.cri, h.host)
			if err != nil {
				return nil, u, err
			}
			if user == "" || secret == "" {
				return nil, u, fmt.Errorf("%w: no basic auth credentials", errInvalidAuthorization)
			}
			f.authorization[h.host] = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+secret))
		case "bearer":
			resp.Body.Close()
			return nil, u, fmt.Errorf("the test kubelet does not answer a Bearer challenge (%s): not implemented", challenge)
		default:
			return resp, u, nil
		}
	}
}

// send sends one GET to h: over h's scheme, and for an http host with
// TLS settings over https first, then over http when the host answered
// in plain http (containerd's httpFallback).
func (f *fetcher) send(ctx context.Context, h host, c *http.Client, img image, accept string, what ...string) (*http.Response, string, error) {
	u := hostURL(h, h.scheme, img, what...)
	resp, err := f.do(ctx, c, h, u, accept)
	if err != nil && h.fallback && (isTLSError(err) || isPortError(err, h.host)) {
		u = hostURL(h, "http", img, what...)
		resp, err = f.do(ctx, c, h, u, accept)
	}
	return resp, u, err
}

func (f *fetcher) do(ctx context.Context, c *http.Client, h host, u, accept string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "containerd/test-kubelet")
	if a := f.authorization[h.host]; a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// isTLSError is containerd's: the host answered the TLS handshake in
// plain HTTP, or the handshake timed out. (containerd's round tripper
// sees the TLS record; http.Client turns it into ErrSchemeMismatch.)
func isTLSError(err error) bool {
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && string(rh.RecordHeader[:]) == "HTTP/" || errors.Is(err, http.ErrSchemeMismatch) {
		return true
	}
	return strings.Contains(err.Error(), "TLS handshake timeout")
}

// isPortError is containerd's: a connection refused or timed out on a
// host that names no port (then http's port may answer).
func isPortError(err error, host string) bool {
	if !errors.Is(err, syscall.ECONNREFUSED) && !os.IsTimeout(err) {
		return false
	}
	_, port, _ := net.SplitHostPort(host)
	return port == ""
}

// unexpected is containerd's error for a status it did not expect, with
// the registry's own errors when its body has them.
func unexpected(resp *http.Response, u string) error {
	err := fmt.Errorf("unexpected status from GET request to %s: %s", u, resp.Status)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var registry struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &registry) == nil {
		for _, e := range registry.Errors {
			err = fmt.Errorf("%w; %s: %s", err, strings.ToLower(strings.ReplaceAll(e.Code, "_", " ")), e.Message)
		}
	}
	return err
}

// mediaTypeOf is a manifest's media type: its Content-Type, else its
// own mediaType field.
func mediaTypeOf(resp *http.Response, body []byte) string {
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	ct = strings.TrimSpace(ct)
	switch ct {
	case mediaDockerManifest, mediaDockerList, mediaOCIManifest, mediaOCIIndex, mediaDockerSchema1:
		return ct
	}
	var m struct {
		MediaType string `json:"mediaType"`
	}
	if json.Unmarshal(body, &m) == nil && m.MediaType != "" {
		return m.MediaType
	}
	return ct
}

// parseAuth is containerd's CRI ParseAuth: a username and password, an
// identity token (no username), or "auth" (base64 of user:password).
func parseAuth(a *authSpec) (string, string, error) {
	switch {
	case a == nil:
		return "", "", nil
	case a.Username != "":
		return a.Username, a.Password, nil
	case a.IdentityToken != "":
		return "", a.IdentityToken, nil
	case a.Auth != "":
		decoded, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return "", "", err
		}
		user, password, ok := strings.Cut(string(decoded), ":")
		if !ok {
			return "", "", fmt.Errorf("invalid decoded auth")
		}
		return user, strings.Trim(password, "\x00"), nil
	}
	return "", "", nil
}
