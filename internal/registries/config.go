package registries

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// Config is a node's registries.yaml, as k3s and RKE2 read it (rancher's
// wharfie: mirrors, configs; the legacy auths are not used).
type Config struct {
	// File is the file it was read from, as the user named it.
	File string
	// Mirrors are by registry name ("docker.io", "registry.example.com:5000",
	// or "*" for every registry without an entry of its own).
	Mirrors map[string]Mirror
	// Configs are by host (host or host:port, or "*").
	Configs map[string]HostConfig
	// NoDefaultEndpoint is k3s's and RKE2's
	// --disable-default-registry-endpoint: a mirrored registry is not
	// tried itself after its mirrors.
	NoDefaultEndpoint bool
}

// Mirror is one entry of mirrors.
type Mirror struct {
	// Endpoints are the endpoints as written, in order.
	Endpoints []string
	// Rewrites rewrite the repository on every endpoint of the mirror
	// (never on the registry itself), in the order of their patterns.
	Rewrites []Rewrite
}

// Rewrite is one rewrite rule of a mirror: a Go regular expression on the
// repository and its replacement ($1, ${name}).
type Rewrite struct {
	Pattern     string
	Replacement string
	re          *regexp.Regexp
}

// HostConfig is one entry of configs: TLS settings and credentials for a
// host. Its credentials are never printed (String leaves them out).
type HostConfig struct {
	Auth *Auth
	TLS  *TLS
	// Line is the entry's line in the file, for errors.
	Line int
}

// Auth is a host's credentials in registries.yaml.
type Auth struct {
	Username, Password string
	// Auth is base64 of "username:password".
	Auth string
	// IdentityToken is an OAuth refresh token (identity_token).
	IdentityToken string
}

// String says which kind of credential it is, never its value.
func (a *Auth) String() string {
	switch {
	case a == nil:
		return "none"
	case a.IdentityToken != "":
		return "an identity token"
	default:
		return "a username and password"
	}
}

// TLS is a host's TLS settings: files on the node.
type TLS struct {
	CAFile, CertFile, KeyFile string
	InsecureSkipVerify        bool
}

// set says whether t changes how the host is reached (containerd then
// tries HTTPS first on an http:// endpoint).
func (t *TLS) set() bool {
	return t != nil && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify)
}

// Parse reads data as registries.yaml; file names it in errors. Every
// error is bad input naming the file, line and field: a key k3s does not
// know (k3s would ignore it), a rewrite that is not a regular expression
// (k3s would skip it), an endpoint that is not a URL, a cert_file without
// its key_file. An empty file is a Config with nothing in it.
func Parse(file string, data []byte) (*Config, error) {
	f := yamlfile.File{Name: file}
	c := &Config{File: file, Mirrors: map[string]Mirror{}, Configs: map[string]HostConfig{}}
	if strings.TrimSpace(string(data)) == "" {
		return c, nil
	}
	root, err := f.Parse(data, "empty registries.yaml")
	if err != nil {
		if strings.Contains(err.Error(), "empty registries.yaml") {
			return c, nil
		}
		return nil, err
	}
	top, err := f.Fields(root, "", "mirrors", "configs", "auths")
	if err != nil {
		return nil, err
	}
	if n := top.Get("mirrors"); n != nil {
		entries, err := f.Entries(n, "mirrors")
		if err != nil {
			return nil, err
		}
		for _, name := range entries.Names() {
			m, err := parseMirror(f, entries.Get(name), entries.Path(name))
			if err != nil {
				return nil, err
			}
			c.Mirrors[name] = m
		}
	}
	if n := top.Get("configs"); n != nil {
		entries, err := f.Entries(n, "configs")
		if err != nil {
			return nil, err
		}
		for _, name := range entries.Names() {
			hc, err := parseHostConfig(f, entries.Get(name), entries.Path(name))
			if err != nil {
				return nil, err
			}
			hc.Line = entries.Key(name).Line
			c.Configs[name] = hc
		}
	}
	return c, nil
}

func parseMirror(f yamlfile.File, n *yaml.Node, field string) (Mirror, error) {
	var m Mirror
	if n == nil {
		return m, nil
	}
	fs, err := f.Fields(n, field, "endpoint", "rewrite")
	if err != nil {
		return m, err
	}
	if en := fs.Get("endpoint"); en != nil {
		items, err := f.Sequence(en, fs.Path("endpoint"))
		if err != nil {
			return m, err
		}
		for i, item := range items {
			at := yamlfile.Index(fs.Path("endpoint"), i)
			s, err := f.String(item, at)
			if err != nil {
				return m, err
			}
			if _, _, err := endpointURL(s); err != nil {
				return m, f.Fail(item, at, err)
			}
			m.Endpoints = append(m.Endpoints, s)
		}
	}
	if rn := fs.Get("rewrite"); rn != nil {
		rules, err := f.Entries(rn, fs.Path("rewrite"))
		if err != nil {
			return m, err
		}
		for _, pattern := range rules.Names() {
			at := rules.Path(pattern)
			repl, err := f.String(rules.Get(pattern), at)
			if err != nil {
				return m, err
			}
			re, err := regexp.Compile(pattern)
			if err != nil {
				return m, f.Failf(rules.Key(pattern), at, "not a regular expression (Go syntax, as containerd compiles it): %v", err)
			}
			m.Rewrites = append(m.Rewrites, Rewrite{Pattern: pattern, Replacement: repl, re: re})
		}
		// containerd tries them in no fixed order (a Go map); a fixed
		// one here, so that a report reads the same twice
		slices.SortFunc(m.Rewrites, func(a, b Rewrite) int { return strings.Compare(a.Pattern, b.Pattern) })
	}
	return m, nil
}

func parseHostConfig(f yamlfile.File, n *yaml.Node, field string) (HostConfig, error) {
	var hc HostConfig
	if n == nil {
		return hc, nil
	}
	fs, err := f.Fields(n, field, "auth", "tls")
	if err != nil {
		return hc, err
	}
	if an := fs.Get("auth"); an != nil {
		a, err := f.Fields(an, fs.Path("auth"), "username", "password", "auth", "identity_token")
		if err != nil {
			return hc, err
		}
		hc.Auth = &Auth{}
		for _, p := range []struct {
			key string
			to  *string
		}{{"username", &hc.Auth.Username}, {"password", &hc.Auth.Password}, {"auth", &hc.Auth.Auth}, {"identity_token", &hc.Auth.IdentityToken}} {
			if *p.to, err = f.OptString(a, p.key); err != nil {
				return hc, err
			}
		}
	}
	if tn := fs.Get("tls"); tn != nil {
		t, err := f.Fields(tn, fs.Path("tls"), "ca_file", "cert_file", "key_file", "insecure_skip_verify")
		if err != nil {
			return hc, err
		}
		hc.TLS = &TLS{}
		for _, p := range []struct {
			key string
			to  *string
		}{{"ca_file", &hc.TLS.CAFile}, {"cert_file", &hc.TLS.CertFile}, {"key_file", &hc.TLS.KeyFile}} {
			if *p.to, err = f.OptString(t, p.key); err != nil {
				return hc, err
			}
		}
		if v := t.Get("insecure_skip_verify"); v != nil {
			if hc.TLS.InsecureSkipVerify, err = f.Bool(v, t.Path("insecure_skip_verify")); err != nil {
				return hc, err
			}
		}
		if (hc.TLS.CertFile == "") != (hc.TLS.KeyFile == "") {
			return hc, f.Failf(tn, fs.Path("tls"), "cert_file and key_file go together (a client certificate and its key)")
		}
	}
	return hc, nil
}

// endpointURL is an endpoint as k3s normalizes it (normalizeEndpointAddress):
// https unless it names a scheme, http for localhost or a loopback
// address on a port other than 443; the API root "/v2" for no path, "/"
// or "/v2", any other path kept as the API root itself (override).
func endpointURL(s string) (u *url.URL, override bool, err error) {
	raw := s
	if !strings.Contains(raw, "://") {
		raw = "//" + raw
	}
	u, err = url.Parse(raw)
	if err != nil {
		return nil, false, fmt.Errorf("not an endpoint URL: %w", err)
	}
	if u.Host == "" {
		return nil, false, fmt.Errorf("not an endpoint URL: %q names no host", s)
	}
	switch u.Scheme {
	case "":
		if port := u.Port(); isLocalhost(u.Host) && port != "" && port != "443" {
			u.Scheme = "http"
		} else {
			u.Scheme = "https"
		}
	case "http", "https":
	default:
		return nil, false, fmt.Errorf("not an endpoint URL: scheme %q (want http or https)", u.Scheme)
	}
	u.Host = defaultHost(u.Host)
	switch u.Path {
	case "", "/", "/v2":
		u.Path = "/v2"
		return u, false, nil
	}
	return u, true, nil
}
