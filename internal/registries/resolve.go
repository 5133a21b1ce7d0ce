package registries

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/distribution/reference"
)

// DockerHub is the registry of a short name (nginx, library/nginx).
const DockerHub = "docker.io"

// Image is an image reference as containerd normalizes it.
type Image struct {
	// Written is the reference as the pod spec writes it.
	Written string
	// Registry is the registry's name (docker.io for a short name);
	// Repository the path in it (library/nginx for nginx).
	Registry, Repository string
	// Tag is the tag ("latest" when neither a tag nor a digest is
	// written); Digest the digest, when written (then pulled by it).
	Tag, Digest string
}

// ParseImage normalizes ref as the node does (distribution's reference:
// nginx → docker.io/library/nginx:latest, index.docker.io → docker.io);
// an error says why the kubelet would not pull it (InvalidImageName).
func ParseImage(ref string) (Image, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return Image{}, fmt.Errorf("not an image reference: %w", err)
	}
	img := Image{Written: ref, Registry: reference.Domain(named), Repository: reference.Path(named)}
	if d, ok := named.(reference.Digested); ok {
		img.Digest = d.Digest().String()
	}
	if t, ok := named.(reference.Tagged); ok {
		img.Tag = t.Tag()
	}
	if img.Tag == "" && img.Digest == "" {
		img.Tag = "latest"
	}
	return img, nil
}

// Ref is what the manifest is asked for by: the digest when there is one,
// else the tag.
func (i Image) Ref() string {
	if i.Digest != "" {
		return i.Digest
	}
	return i.Tag
}

// String is the normalized reference: docker.io/library/nginx:latest,
// registry.example.com/app@sha256:….
func (i Image) String() string {
	s := i.Registry + "/" + i.Repository
	if i.Tag != "" {
		s += ":" + i.Tag
	}
	if i.Digest != "" {
		s += "@" + i.Digest
	}
	return s
}

// Endpoint is one place the node tries for an image, in the order it
// tries them: its mirrors as listed, then the registry itself.
type Endpoint struct {
	// URL is scheme, host and API root: https://mirror:5000/v2, or the
	// path an endpoint gives in place of /v2 (override).
	URL url.URL
	// Schemes are the schemes tried, in order: https, or http, or https
	// then http (an http:// endpoint with TLS settings; a loopback
	// registry with no settings).
	Schemes []string
	// Mirror: a mirror of the registry; else the registry itself.
	Mirror bool
	// Registry is the image's registry; Repository the repository asked
	// here (rewritten by a mirror's rewrite when one matched: Rewrite).
	Registry, Repository string
	Rewrite              string
	// Namespace is the ns query parameter containerd adds on a host other
	// than the registry ("" when none).
	Namespace string
	// TLS is the host's TLS settings (nil: the system's CAs); Auth its
	// credentials in registries.yaml (nil: none), as containerd looks
	// them up: by the endpoint's host.
	TLS  *TLS
	Auth *Auth
	// InsecureSkipVerify: containerd skips verification of this host
	// (TLS.InsecureSkipVerify, or a loopback registry with no settings).
	InsecureSkipVerify bool
}

// String names the endpoint for people: "https://mirror:5000/v2 (a
// mirror; as mirror/app, rewritten by ^app$)".
func (e Endpoint) String() string {
	u := e.URL
	var notes []string
	if e.Mirror {
		notes = append(notes, "a mirror")
	} else {
		notes = append(notes, "the registry")
	}
	if e.Repository != "" {
		as := "as " + e.Repository
		if e.Rewrite != "" {
			as += ", rewritten by " + e.Rewrite
		}
		notes = append(notes, as)
	}
	return u.String() + " (" + strings.Join(notes, "; ") + ")"
}

// Resolve is where the node pulls img from: the endpoints containerd
// tries, in order, as k3s writes them into containerd's hosts.toml from
// c (nil: no registries.yaml).
//
// A registry with an entry of its own (mirrors with endpoints, or configs
// or a mirror whose registry endpoint carries TLS settings or
// credentials) uses it; any other registry uses "*" when there is one;
// the registry itself comes last, unless NoDefaultEndpoint is set for a
// mirrored registry. A mirror's rewrites apply on its endpoints only.
func (c *Config) Resolve(img Image) []Endpoint {
	hosts := c.hosts()
	h, ok := hosts[img.Registry]
	if !ok {
		h, ok = hosts["_default"]
	}
	if !ok {
		// no hosts.toml: containerd's own default for the registry
		e := registryDefault(img)
		if c != nil {
			e.Auth = c.authFor(e.URL.Host)
		}
		return []Endpoint{e}
	}
	var out []Endpoint
	for _, ep := range h.endpoints {
		e := ep.endpoint(img, true)
		e.Auth = c.authFor(ep.url.Host)
		out = append(out, e)
	}
	if h.server != nil {
		srv := *h.server
		var e Endpoint
		if srv.url == nil { // "*": the pulled registry's own host, as containerd fills it
			e = registryDefault(img)
			if srv.tls.set() {
				e.TLS, e.InsecureSkipVerify = srv.tls, e.InsecureSkipVerify || srv.tls.InsecureSkipVerify
			}
		} else {
			e = srv.endpoint(img, false)
		}
		e.Auth = c.authFor(e.URL.Host)
		out = append(out, e)
	}
	return out
}

// registryDefault is the registry itself as containerd reaches it when
// no hosts.toml names its URL (ConfigureHosts): https, docker.io at
// registry-1.docker.io; a localhost or loopback registry over http
// (tried over https first: the scheme is ambiguous) on a port other than
// 443 and 80, https only on 443 or none, http only on 80, and unverified
// but on 80.
func registryDefault(img Image) Endpoint {
	u := url.URL{Scheme: "https", Host: defaultHost(img.Registry), Path: "/v2"}
	e := Endpoint{URL: u, Schemes: []string{"https"}, Registry: img.Registry, Repository: img.Repository}
	if isLocalhost(img.Registry) {
		_, port, _ := net.SplitHostPort(img.Registry)
		switch port {
		case "", "443":
			e.InsecureSkipVerify = true
		case "80":
			e.Schemes = []string{"http"}
		default:
			e.Schemes, e.InsecureSkipVerify = []string{"https", "http"}, true
		}
		e.URL.Scheme = e.Schemes[0]
	}
	e.Namespace = namespace(e, img)
	return e
}

// hostEntry is one registry's hosts.toml as k3s writes it: its mirror
// endpoints, then its server (nil: not tried).
type hostEntry struct {
	endpoints []hostEndpoint
	server    *hostEndpoint
}

// hostEndpoint is one host of a hosts.toml.
type hostEndpoint struct {
	url      *url.URL // nil: the server of "*", filled per registry
	override bool
	tls      *TLS
	auth     *Auth // of the server's configs entry (decides whether it is kept)
	rewrites []Rewrite
}

func (h hostEndpoint) hasConfig() bool {
	return h.override || h.auth != nil || h.tls != nil || len(h.rewrites) > 0
}

// endpoint is h for img: on a mirror, the repository rewritten (the
// first rewrite that changes it); the schemes tried. The server is never
// rewritten, even when it was the mirror's last endpoint and k3s moved it
// there with the mirror's rewrites: its hosts.toml template writes no
// rewrite for the server ("rewrites are not applied to pulls against the
// default endpoint", k3s's docs).
func (h hostEndpoint) endpoint(img Image, mirror bool) Endpoint {
	e := Endpoint{URL: *h.url, Mirror: mirror, Registry: img.Registry, Repository: img.Repository, TLS: h.tls}
	rewrites := h.rewrites
	if !mirror {
		rewrites = nil
	}
	for _, rw := range rewrites {
		if r := rw.re.ReplaceAllString(img.Repository, rw.Replacement); r != img.Repository {
			e.Repository, e.Rewrite = r, rw.Pattern
			break
		}
	}
	e.Schemes = []string{e.URL.Scheme}
	if e.URL.Scheme == "http" && h.tls.set() && e.URL.Port() != "80" {
		e.Schemes = []string{"https", "http"}
	}
	e.URL.Scheme = e.Schemes[0]
	e.InsecureSkipVerify = h.tls != nil && h.tls.InsecureSkipVerify
	e.Namespace = namespace(e, img)
	return e
}

// namespace is the ns parameter containerd adds on a host that is a
// proxy of the image's registry (any host but the registry's own:
// containerd's isProxy).
func namespace(e Endpoint, img Image) string {
	if e.URL.Host == img.Registry || (img.Registry == DockerHub && e.URL.Host == defaultHost(DockerHub)) {
		return ""
	}
	return img.Registry
}

// hosts are the hosts.toml k3s writes for c (getHostConfigs), by
// registry, "*" as "_default".
func (c *Config) hosts() map[string]hostEntry {
	out := map[string]hostEntry{}
	if c == nil {
		return out
	}
	dirName := func(name string) string {
		if name == "*" {
			return "_default"
		}
		return name
	}
	// the registry endpoint of each configs entry
	for name, hc := range c.Configs {
		srv := &hostEndpoint{tls: hc.TLS, auth: hc.Auth}
		if name != "*" {
			u, _, err := endpointURL(name)
			if err != nil {
				continue // k3s logs it and goes on
			}
			srv.url = u
		}
		out[dirName(name)] = hostEntry{server: srv}
	}
	for name, m := range c.Mirrors {
		h, ok := out[name] // a configs entry of the same name ("*" is never found: its is under _default)
		if !ok {
			hc := c.configForHost(name)
			srv := &hostEndpoint{tls: hc.TLS, auth: hc.Auth}
			if name != "*" {
				u, _, err := endpointURL(name)
				if err != nil {
					continue
				}
				srv.url = u
			}
			switch {
			case c.NoDefaultEndpoint:
				srv = nil
			case name == "*":
				srv = &hostEndpoint{} // the pulled registry, with no settings
			}
			h = hostEntry{server: srv}
		}
		seen := map[string]bool{}
		for i, raw := range m.Endpoints {
			u, override, err := endpointURL(raw)
			if err != nil || seen[u.String()] {
				continue // k3s logs it and goes on
			}
			seen[u.String()] = true
			hc := c.configForHost(registryOf(u.Host))
			ep := hostEndpoint{url: u, override: override, tls: hc.TLS, auth: hc.Auth, rewrites: m.Rewrites}
			if i+1 == len(m.Endpoints) && h.server != nil && h.server.url != nil && h.server.url.String() == u.String() {
				h.server = &ep // the registry itself, listed last: the server
				continue
			}
			h.endpoints = append(h.endpoints, ep)
		}
		out[dirName(name)] = h
	}
	for name, h := range out {
		if len(h.endpoints) == 0 && (h.server == nil || !h.server.hasConfig()) {
			delete(out, name)
		}
	}
	return out
}

// configForHost is the configs entry of a registry, as k3s looks it up:
// under docker.io's real host first, then its name.
func (c *Config) configForHost(name string) HostConfig {
	if h := defaultHost(name); h != name {
		if hc, ok := c.Configs[h]; ok {
			return hc
		}
	}
	return c.Configs[name]
}

// authFor is the credentials containerd uses on host (from the CRI's
// Credentials callback): configs of the host, registry-1.docker.io also
// under docker.io and index.docker.io; never "*".
func (c *Config) authFor(host string) *Auth {
	if c == nil {
		return nil
	}
	if hc, ok := c.Configs[host]; ok && hc.Auth != nil {
		return hc.Auth
	}
	if host == "registry-1.docker.io" {
		for _, alias := range []string{"docker.io", "index.docker.io"} {
			if hc, ok := c.Configs[alias]; ok && hc.Auth != nil {
				return hc.Auth
			}
		}
	}
	return nil
}

// defaultHost is containerd's DefaultHost: docker.io is served by
// registry-1.docker.io.
func defaultHost(host string) string {
	if host == DockerHub {
		return "registry-1.docker.io"
	}
	return host
}

// registryOf is the registry name of a host, defaultHost's reverse.
func registryOf(host string) string {
	if host == "registry-1.docker.io" {
		return DockerHub
	}
	return host
}

// isLocalhost is containerd's IsLocalhost: localhost or a loopback
// address, with or without a port.
func isLocalhost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
