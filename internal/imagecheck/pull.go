package imagecheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/chart-upgrader/chart-upgrader/internal/httpclient"
	"github.com/chart-upgrader/chart-upgrader/internal/registries"
)

// This file asks registries for manifests as a node's containerd pulls
// them: each endpoint in order (registries.Resolve), the first that
// serves the manifest wins, any error or 4xx/5xx goes on to the next. It
// asks for the manifest (an index, or an image manifest and then its
// config, which says its platform; with HeadsFirst, a HEAD, and the GET
// of an index only), never a layer, with go-containerregistry, each
// endpoint's answer asked once per run.

// DefaultTimeout bounds one endpoint's answer: a registry slower than this
// counts as not answering.
const DefaultTimeout = 30 * time.Second

// How --image-manifests asks for each manifest: its body (GET), or a
// HEAD first (Puller.HeadsFirst).
const (
	ManifestsGet  = "get"
	ManifestsHead = "head"
)

// DefaultJobs is how many images are asked for at once.
const DefaultJobs = 16

// Puller asks registries for images as the node would pull them. Its
// zero value is not usable: NewPuller.
type Puller struct {
	// HeadsFirst, set before the first Pull, asks each manifest with a
	// HEAD and GETs an index only (its platforms): a single-platform
	// image's manifest is not read, so neither is its platform. A
	// registry that counts manifest GETs as pulls (Docker Hub) then
	// counts none for such an image.
	HeadsFirst bool

	registries *Registries
	timeout    time.Duration

	mu         sync.Mutex
	answers    map[string]*asked
	transports map[string]*http.Transport
	hosts      map[string]*hostState // by scheme://host
	requests   atomic.Int64
}

// hostState is whether a host answered this run: its first question goes
// alone, the others wait for it; a host that gave no answer within the
// timeout is not asked again (a dead endpoint costs one timeout per run,
// not one per image).
type hostState struct {
	asked chan struct{} // closed once the first question was answered
	dead  string        // what it said, when it gave no answer
}

// NewPuller asks as a node with r (nil: no registries.yaml) does, each
// endpoint's answer within timeout (0: DefaultTimeout).
func NewPuller(r *Registries, timeout time.Duration) *Puller {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if r == nil {
		r = &Registries{From: "none"}
	}
	return &Puller{registries: r, timeout: timeout, answers: map[string]*asked{}, transports: map[string]*http.Transport{}, hosts: map[string]*hostState{}}
}

// Requests counts the HTTP requests made so far.
func (p *Puller) Requests() int64 { return p.requests.Load() }

// Close closes the idle connections.
func (p *Puller) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.transports {
		t.CloseIdleConnections()
	}
}

// Answer is what one endpoint answered.
type Answer struct {
	Endpoint registries.Endpoint
	// Found: it served the manifest; else Said says what it answered
	// ("MANIFEST_UNKNOWN: manifest unknown (HTTP 404)", "dial tcp …:
	// connection refused").
	Found bool
	Said  string
	// Unauthorized: it answered 401 or 403.
	Unauthorized bool
	// Index: the manifest is an index; Platforms are those it holds (an
	// image manifest's: its config's), "os/arch[/variant]".
	Index     bool
	Platforms []string
	Digest    string
	// PlatformNotRead: an image manifest only HEAD asked for
	// (Puller.HeadsFirst); Platforms is empty.
	PlatformNotRead bool
	// noAnswer: the endpoint gave no answer within the timeout.
	noAnswer bool
}

// Pulled is where an image was found.
type Pulled struct {
	Image registries.Image
	// Tried are the endpoints asked, in order, up to the one that served
	// it (Found, the last), or all of them.
	Tried []Answer
	Found *Answer
}

// asked is one endpoint's answer, asked once.
type asked struct {
	once   sync.Once
	answer Answer
}

// Pull asks for img where the node would pull it from, with cri the
// credentials of the pod's pull secrets for img's registry (nil or
// anonymous: none); the node then uses them on every endpoint, else each
// endpoint's own in registries.yaml.
func (p *Puller) Pull(ctx context.Context, img registries.Image, cri authn.Authenticator) Pulled {
	out := Pulled{Image: img}
	useCRI := cri != nil && cri != authn.Anonymous
	for _, e := range p.registries.Config.Resolve(img) {
		auth := cri
		if !useCRI {
			auth = authOf(e.Auth)
		}
		a := p.ask(ctx, e, img, auth)
		out.Tried = append(out.Tried, a)
		if a.Found {
			out.Found = &out.Tried[len(out.Tried)-1]
			break
		}
	}
	return out
}

// authOf is registries.yaml's credentials as go-containerregistry takes
// them.
func authOf(a *registries.Auth) authn.Authenticator {
	if a == nil {
		return authn.Anonymous
	}
	return authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth, IdentityToken: a.IdentityToken})
}

// ask is e's answer for img with auth, asked once per run.
func (p *Puller) ask(ctx context.Context, e registries.Endpoint, img registries.Image, auth authn.Authenticator) Answer {
	key := strings.Join([]string{strings.Join(e.Schemes, "+"), e.URL.String(), e.Namespace, e.Repository, img.Ref(), fingerprint(auth)}, " ")
	p.mu.Lock()
	a, ok := p.answers[key]
	if !ok {
		a = &asked{}
		p.answers[key] = a
	}
	p.mu.Unlock()
	a.once.Do(func() {
		for _, scheme := range e.Schemes {
			a.answer = p.getOnce(ctx, e, scheme, img, auth)
			if a.answer.Found || !a.answer.transportLevel() {
				break
			}
		}
	})
	return a.answer
}

// getOnce is get, but a host's first question goes alone and a host that
// gave no answer to it is not asked again this run.
func (p *Puller) getOnce(ctx context.Context, e registries.Endpoint, scheme string, img registries.Image, auth authn.Authenticator) Answer {
	key := scheme + "://" + e.URL.Host
	p.mu.Lock()
	h, known := p.hosts[key]
	if !known {
		h = &hostState{asked: make(chan struct{})}
		p.hosts[key] = h
	}
	p.mu.Unlock()
	if !known {
		a := p.get(ctx, e, scheme, img, auth)
		if a.noAnswer {
			h.dead = a.Said
		}
		close(h.asked)
		return a
	}
	select {
	case <-h.asked:
	case <-ctx.Done():
		out := Answer{Endpoint: e, Said: "not asked: " + ctx.Err().Error()}
		out.Endpoint.URL.Scheme = scheme
		return out
	}
	if h.dead != "" {
		out := Answer{Endpoint: e, Said: h.dead + " (asked once this run)", noAnswer: true}
		out.Endpoint.URL.Scheme = scheme
		return out
	}
	return p.get(ctx, e, scheme, img, auth)
}

// transportLevel: no HTTP answer at all (a refused connection, a TLS
// handshake with a plain HTTP server): worth the next scheme.
func (a Answer) transportLevel() bool {
	return !a.Found && !strings.Contains(a.Said, "(HTTP ")
}

// fingerprint tells credentials apart without keeping them.
func fingerprint(auth authn.Authenticator) string {
	if auth == nil || auth == authn.Anonymous {
		return "anonymous"
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return "unusable"
	}
	b, _ := json.Marshal(cfg)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// get asks e, over scheme, for img's manifest and, for an image manifest,
// its config.
func (p *Puller) get(ctx context.Context, e registries.Endpoint, scheme string, img registries.Image, auth authn.Authenticator) Answer {
	out := Answer{Endpoint: e}
	out.Endpoint.URL.Scheme = scheme
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var ref name.Reference
	var err error
	if img.Digest != "" {
		ref, err = name.NewDigest(e.URL.Host + "/" + e.Repository + "@" + img.Digest)
	} else {
		ref, err = name.NewTag(e.URL.Host + "/" + e.Repository + ":" + img.Tag)
	}
	if err != nil {
		out.Said = fmt.Sprintf("not a reference there: %v", err)
		return out
	}
	rt := &endpointTransport{base: p.transport(e, scheme), endpoint: out.Endpoint, scheme: scheme, requests: &p.requests,
		manifest: e.Repository + "/manifests/" + img.Ref()}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(rt), remote.WithAuth(auth),
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}), remote.WithUserAgent(httpclient.UserAgent)}
	rp, err := remote.NewPuller(opts...) // one ping and token for the HEAD and the GET
	if err != nil {
		out.Said = err.Error()
		return out
	}
	if p.HeadsFirst {
		head, err := rp.Head(ctx, ref)
		var terr *transport.Error
		switch {
		case err == nil && !head.MediaType.IsIndex():
			out.Found, out.Digest, out.PlatformNotRead = true, head.Digest.String(), true
			return out
		case err != nil && !errors.As(err, &terr):
			// no HTTP answer (a dial error, the timeout): a GET would get none either
			out.Said, out.Unauthorized = said(ctx, err, p.timeout)
			out.noAnswer = ctx.Err() != nil
			return out
		}
		// an index, whose platforms are needed; or an HTTP error, which the
		// GET says in the registry's words (a HEAD's answer has no body)
	}
	desc, err := rp.Get(ctx, ref)
	if err != nil {
		out.Said, out.Unauthorized = said(ctx, err, p.timeout)
		out.noAnswer = ctx.Err() != nil && !strings.Contains(out.Said, "(HTTP ")
		return out
	}
	out.Found, out.Digest = true, desc.Digest.String()
	switch {
	case desc.MediaType.IsIndex():
		out.Index = true
		idx, err := desc.ImageIndex()
		if err == nil {
			var m *v1.IndexManifest
			if m, err = idx.IndexManifest(); err == nil {
				for _, d := range m.Manifests {
					if d.Platform != nil && d.Platform.OS != "unknown" {
						out.Platforms = append(out.Platforms, platformString(*d.Platform))
					}
				}
			}
		}
		if err != nil {
			out.Found, out.Said = false, fmt.Sprintf("an index that does not read: %v", err)
		}
	case desc.MediaType.IsImage():
		img, err := desc.Image()
		var cfg *v1.ConfigFile
		if err == nil {
			cfg, err = img.ConfigFile()
		}
		if err != nil {
			said, unauthorized := said(ctx, err, p.timeout)
			out.Found, out.Said, out.Unauthorized = false, "its manifest, but not its config: "+said, unauthorized
			break
		}
		out.Platforms = []string{platformString(v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant})}
	}
	return out
}

// said is what an endpoint's error says, in the registry's words where it
// gave any, and whether it refused the credentials.
func said(ctx context.Context, err error, timeout time.Duration) (string, bool) {
	var terr *transport.Error
	if errors.As(err, &terr) {
		status := fmt.Sprintf("(HTTP %d)", terr.StatusCode)
		unauthorized := terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden
		if len(terr.Errors) == 0 {
			return strings.TrimSpace(http.StatusText(terr.StatusCode) + " " + status), unauthorized
		}
		var parts []string
		for _, d := range terr.Errors {
			parts = append(parts, fmt.Sprintf("%s: %s", d.Code, d.Message))
		}
		return strings.Join(parts, "; ") + " " + status, unauthorized
	}
	if ctx.Err() != nil {
		return fmt.Sprintf("no answer within %s", timeout), false
	}
	return httpclient.Scrub(err).Error(), false
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// transport is the shared transport to e's host over scheme, with the
// node's TLS settings for it.
func (p *Puller) transport(e registries.Endpoint, scheme string) *http.Transport {
	t := p.registries.nodeTLS(e)
	key := fmt.Sprintf("%s://%s %p %v", scheme, e.URL.Host, e.TLS, t.SkipVerify)
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr, ok := p.transports[key]; ok {
		return tr
	}
	tr := httpclient.NodeTransport(t)
	p.transports[key] = tr
	return tr
}

// endpointTransport sends go-containerregistry's requests for a registry
// at endpoint's host to the endpoint as containerd would: over its
// scheme, under its API root (an override path in place of /v2), with the
// ns parameter of a mirror. It counts every request.
//
// containerd sends no /v2/ ping: its first request is the manifest's,
// under the endpoint's API root, and it authenticates on that request's
// challenge. go-containerregistry pings scheme://host/v2/ first, which
// under an override path (a proxy-cache mirror at https://m/prefix) is
// not the API at all and may answer 404: there the ping is sent as a
// HEAD of the manifest, whose answer (200, or 401 with the challenge)
// says what containerd's first request would.
type endpointTransport struct {
	base     http.RoundTripper
	endpoint registries.Endpoint
	scheme   string
	requests *atomic.Int64
	manifest string // REPOSITORY/manifests/REF, for the ping of an override path
}

func (t *endpointTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	if req.URL.Host != t.endpoint.URL.Host {
		return t.base.RoundTrip(req) // a token service elsewhere
	}
	r := req.Clone(req.Context())
	r.URL.Scheme = t.scheme
	if r.URL.Path == "/v2/" && t.endpoint.URL.Path != "/v2" && t.manifest != "" {
		r.Method, r.URL.Path = http.MethodHead, "/v2/"+t.manifest
		r.Header.Set("Accept", strings.Join(manifestTypes, ","))
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/v2/"); ok && rest != "" {
		r.URL.Path = strings.TrimSuffix(t.endpoint.URL.Path, "/") + "/" + rest
		r.URL.RawPath = ""
		if t.endpoint.Namespace != "" {
			q := r.URL.Query()
			q.Set("ns", t.endpoint.Namespace)
			r.URL.RawQuery = q.Encode()
		}
	}
	return t.base.RoundTrip(r)
}

// manifestTypes are the manifest media types containerd accepts.
var manifestTypes = []string{
	"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json", "*/*",
}
