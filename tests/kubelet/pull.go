package kubelet

// Where the node's containerd pulls an image from, and with which
// credentials, from the hosts.toml k3s wrote (hosts.go): containerd's
// rules (core/remotes/docker/config hosts.go ConfigureHosts and
// hostPaths, with k3s's fork appending the server only when hosts.toml
// names one or nothing else; resolver.go withRewritesFromHost,
// addNamespace; internal/cri/server/images PullImage's credentials).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/authn"
)

// node is what the node's containerd was given: the host directories
// k3s wrote, and the registries.yaml's configs (their auth, which k3s
// writes into config.toml by host).
type node struct {
	dirs    map[string]hostsDir
	configs map[string]*configSpec
}

// newNode reads registries.yaml at path ("": none) as k3s does.
func newNode(path string, noDefaultEndpoint bool) (*node, error) {
	f, err := readRegistries(path)
	if err != nil {
		return nil, err
	}
	return &node{dirs: hosts(f, noDefaultEndpoint), configs: f.Configs}, nil
}

// image is a reference as containerd's CRI takes it.
type image struct {
	ref        string // normalized: docker.io/library/nginx:latest
	registry   string // docker.io
	repository string // library/nginx
	object     string // the digest when there is one, else the tag
}

// parseImage normalizes ref as the kubelet and containerd do
// (distribution's ParseDockerRef: a short name is docker.io's, a name
// without tag or digest is :latest, a digest wins over a tag).
func parseImage(ref string) (image, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return image{}, err
	}
	img := image{ref: named.String(), registry: reference.Domain(named), repository: reference.Path(named)}
	switch r := named.(type) {
	case reference.Digested:
		img.object = r.Digest().String()
	case reference.Tagged:
		img.object = r.Tag()
	}
	return img, nil
}

// host is one place containerd asks for an image, in its order.
type host struct {
	scheme, host string
	// root is the API root: /v2, or an endpoint's own path.
	root string
	// tls is what hosts.toml says of the host's TLS; explicit when it
	// says anything (then an http host is tried over https first).
	tls      tlsSpec
	explicit bool
	// rewrites are the mirror's (never the server's).
	rewrites map[string]string
	server   bool // the directory's server, or the default host
	// fallback: the host is http, asked over https first, then over
	// http when it answers https in plain http.
	fallback bool
}

// hosts is where containerd asks for img, in order: the registry's own
// directory, else "_default", else none; its endpoints as listed, then
// its server, when hosts.toml names one or has no endpoint (with no
// server URL, or no directory at all, the registry's default host).
func (n *node) hosts(registry string) []host {
	dir, ok := n.dirs[registry]
	if !ok {
		dir, ok = n.dirs["_default"]
	}
	var out []host
	if ok {
		for _, ep := range dir.endpoints {
			h := host{scheme: ep.url.Scheme, host: ep.url.Host, root: apiRoot(ep.url.Path, ep.overridePath), rewrites: ep.rewrites}
			h.tls, h.explicit = tlsOf(ep.config.TLS)
			out = append(out, h)
		}
		// k3s's template writes the server key when the server has a URL
		// (an empty one for mirrors."*"); its TLS goes at the top level.
		named := dir.server != nil && dir.server.url != nil
		if named || len(out) == 0 {
			var h host
			if dir.server != nil {
				h.tls, h.explicit = tlsOf(dir.server.config.TLS)
			}
			if named && dir.server.url.Host != "" {
				u := dir.server.url
				h.scheme, h.host, h.root = u.Scheme, u.Host, apiRoot(u.Path, false)
			} else {
				defaultOf(registry, &h)
			}
			h.server = true
			out = append(out, h)
		}
	} else {
		h := host{server: true}
		defaultOf(registry, &h)
		out = append(out, h)
	}
	// An http host with TLS settings, on a port other than 80, is asked
	// over https first (containerd's HTTP fallback).
	for i := range out {
		if _, port, _ := net.SplitHostPort(out[i].host); out[i].scheme == "http" && out[i].explicit && port != "80" {
			out[i].scheme, out[i].fallback = "https", true
		}
	}
	return out
}

// defaultOf fills h as containerd fills a host with no URL: docker.io's
// is https://registry-1.docker.io; a loopback registry's is http on a
// port other than 443 (then tried over https first), unverified on a
// port other than 80; any other's is https://<registry>.
func defaultOf(registry string, h *host) {
	h.host, h.scheme, h.root = registry, "https", "/v2"
	switch {
	case registry == "docker.io":
		h.host = "registry-1.docker.io"
	case isLocalhost(registry):
		_, port, _ := net.SplitHostPort(registry)
		if port != "" && port != "443" {
			h.scheme = "http"
		}
		if port != "80" {
			h.tls.InsecureSkipVerify, h.explicit = true, true
		}
	}
}

// apiRoot is containerd's reading of a hosts.toml URL's path: the path
// itself when it overrides the root, else under /v2.
func apiRoot(p string, override bool) string {
	if p == "" {
		if override {
			return ""
		}
		return "/v2"
	}
	p = path.Clean(p)
	if !override && !strings.HasSuffix(p, "/v2") {
		p += "/v2"
	}
	return p
}

func tlsOf(t *tlsSpec) (tlsSpec, bool) {
	if t == nil {
		return tlsSpec{}, false
	}
	return *t, t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
}

// repositoryOn is img's repository as asked of h: rewritten by the first
// of h's rewrites that changes it (a pattern that does not compile is
// skipped). containerd takes the patterns in a map's order; here they go
// in lexical order.
func repositoryOn(h host, repository string) string {
	patterns := make([]string, 0, len(h.rewrites))
	for p := range h.rewrites {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			continue
		}
		if r := re.ReplaceAllString(repository, h.rewrites[p]); r != repository {
			return r
		}
	}
	return repository
}

// isProxy is containerd's: a host other than the registry's own is
// asked with ?ns=<registry>.
func isProxy(registry, host string) bool {
	return registry != host && (registry != "docker.io" || host != "registry-1.docker.io")
}

// credentials is what containerd's CRI answers a host's challenge with:
// the pull's own credentials when the kubelet passed some (the pod's
// pull secrets, for every host), else the registries.yaml auth of that
// very host (registry-1.docker.io's also under docker.io), never "*"'s.
func (n *node) credentials(cri authn.Authenticator, requestHost string) (string, string, error) {
	var a *authSpec
	if cri != nil {
		c, err := cri.Authorization()
		if err != nil {
			return "", "", err
		}
		a = &authSpec{Username: c.Username, Password: c.Password, Auth: c.Auth, IdentityToken: c.IdentityToken}
	} else {
		names := []string{requestHost}
		if requestHost == "registry-1.docker.io" {
			names = append(names, "docker.io", "index.docker.io")
		}
		for _, name := range names {
			if c := n.configs[name]; c != nil && c.Auth != nil {
				a = c.Auth
				break
			}
		}
	}
	return parseAuth(a)
}

// pullError is containerd's answer to a pull that failed, as the CRI
// gives it to the kubelet: its gRPC code and its message.
type pullError struct {
	code, desc string
}

func (e *pullError) Error() string {
	return fmt.Sprintf("rpc error: code = %s desc = %s", e.code, e.desc)
}

// answer is what one host said of the manifest.
type answer struct {
	h         host
	url       string
	platforms []platforms.Platform
	err       error
	priority  int // containerd's: which error of all the hosts' it reports
}

// pull pulls img for the node's platform as containerd would (the
// manifest and, for an image, its config; no layer), with cri the pull
// secrets' credentials for img's registry (nil: none). It returns nil or
// containerd's error, and what each host said.
func (n *node) pull(ctx context.Context, img image, platform platforms.Platform, cri authn.Authenticator) ([]answer, error) {
	f := newFetcher(n, cri)
	defer f.close()
	hs := n.hosts(img.registry)
	clients := make([]*http.Client, len(hs))
	for i, h := range hs {
		c, err := f.client(h)
		if err != nil {
			return nil, &pullError{code: "Unknown", desc: fmt.Sprintf("failed to pull and unpack image %q: failed to resolve reference %q: %v", img.ref, img.ref, err)}
		}
		clients[i] = c
	}
	var said []answer
	var found, first *answer
	for i, h := range hs {
		said = append(said, f.manifest(ctx, h, clients[i], img))
		a := &said[len(said)-1]
		if a.err == nil {
			found = a
			break
		}
		// containerd reports the error of the highest priority, the first
		// of that priority: a status it did not expect over a 404 over
		// any other (a connection, a credential refused).
		if first == nil || a.priority > first.priority {
			first = a
		}
		var stop *stopError
		if errors.As(a.err, &stop) {
			first = a
			break
		}
	}
	if found == nil {
		code := "Unknown"
		if first.priority == prioNotFound || first.priority == prioTooLarge {
			code = "NotFound"
		}
		return said, &pullError{code: code, desc: fmt.Sprintf("failed to pull and unpack image %q: failed to resolve reference %q: %v", img.ref, img.ref, first.err)}
	}
	match := platforms.Only(platforms.Normalize(platform))
	for _, p := range found.platforms {
		if match.Match(p) {
			return said, nil
		}
	}
	return said, &pullError{code: "NotFound", desc: fmt.Sprintf("failed to pull and unpack image %q: no match for platform in manifest: not found", img.ref)}
}

// hostURL is the URL of what on h for img: <root>/<repository>/<what>,
// with ?ns=<registry> on a host other than the registry's.
func hostURL(h host, scheme string, img image, what ...string) string {
	u := url.URL{Scheme: scheme, Host: h.host, Path: path.Join(append([]string{"/", h.root, repositoryOn(h, img.repository)}, what...)...)}
	if isProxy(img.registry, h.host) {
		u.RawQuery = url.Values{"ns": {img.registry}}.Encode()
	}
	return u.String()
}
