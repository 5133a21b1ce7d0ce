package kubelet

// The node's registries.yaml, and the hosts.toml k3s writes from it for
// containerd: written from k3s's rules (pkg/agent/containerd/config.go
// getHostConfigs, normalizeEndpointAddress, defaultHostConfig,
// configForHost; pkg/agent/templates HostsTomlTemplate) and containerd's
// (core/remotes/docker DefaultHost, IsLocalhost), not from the image
// check's package: hosts_test.go holds it to k3s's own test cases.

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// registriesFile is a registries.yaml in rancher/wharfie's schema, as
// k3s reads it: unknown keys are ignored.
type registriesFile struct {
	Mirrors map[string]*mirrorSpec `yaml:"mirrors"`
	Configs map[string]*configSpec `yaml:"configs"`
}

type mirrorSpec struct {
	Endpoints []string          `yaml:"endpoint"`
	Rewrites  map[string]string `yaml:"rewrite"`
}

// configSpec is a configs entry: credentials (which k3s writes into
// containerd's config.toml, registry.configs."<host>".auth) and TLS
// (which it writes into hosts.toml).
type configSpec struct {
	Auth *authSpec `yaml:"auth"`
	TLS  *tlsSpec  `yaml:"tls"`
}

type authSpec struct {
	Username      string `yaml:"username"`
	Password      string `yaml:"password"`
	Auth          string `yaml:"auth"`
	IdentityToken string `yaml:"identity_token"`
}

type tlsSpec struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// readRegistries reads the registries.yaml at path ("" or a file that
// is not there: none, as k3s runs without one).
func readRegistries(path string) (*registriesFile, error) {
	f := &registriesFile{}
	if path == "" {
		return f, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// hostEntry is one host of a hosts.toml: the server (the registry
// itself) or a mirror endpoint under [host."<url>"].
type hostEntry struct {
	// url is the host's URL. For the server: nil when hosts.toml has no
	// server key (k3s's "*" from configs alone); empty (server = "")
	// when it stands for the pulled registry (k3s's mirrors."*").
	url *url.URL
	// overridePath: url's path is the API root itself, not /v2.
	overridePath bool
	// config is the configs entry k3s gave the host (its TLS is written
	// into hosts.toml; its auth only marks what k3s's test checks).
	config configSpec
	// rewrites are the mirror's, copied onto each of its endpoints.
	// k3s's template never writes the server's.
	rewrites map[string]string
}

// hasConfig is k3s's endpointHasConfig: whether the host says more than
// its URL.
func (h *hostEntry) hasConfig() bool {
	return h != nil && (h.overridePath || h.config.Auth != nil || h.config.TLS != nil || len(h.rewrites) > 0)
}

// hostsDir is what k3s writes into one certs.d/<dir>/hosts.toml.
type hostsDir struct {
	server    *hostEntry // nil: no server, no TLS at the top
	endpoints []hostEntry
}

// hosts is every directory k3s writes for f, by name ("_default" for
// "*"), with or without --disable-default-registry-endpoint. (The
// embedded registry, spegel, is not modelled.)
func hosts(f *registriesFile, noDefaultEndpoint bool) map[string]hostsDir {
	dirs := map[string]hostsDir{}
	configOf := func(host string) configSpec {
		if c := f.Configs[host]; c != nil {
			return *c
		}
		return configSpec{}
	}

	// Each configs entry is a directory whose server is the registry,
	// with that entry's credentials and TLS.
	for host := range f.Configs {
		server, err := serverOf(host, configOf(host))
		if err != nil {
			continue // k3s logs it and writes nothing
		}
		dirs[dirName(host)] = hostsDir{server: server}
	}

	// Each mirror adds its endpoints to its registry's directory, made
	// here if no configs entry made it. k3s looks the directory up by
	// the mirror's own name, so "*" never finds the "_default" of a
	// configs."*": it starts afresh (and that config is lost).
	for host, m := range f.Mirrors {
		dir, ok := dirs[host]
		if !ok {
			server, err := serverOf(host, endpointConfig(f, host))
			if err != nil {
				continue
			}
			switch {
			case noDefaultEndpoint:
				server = nil
			case host == "*":
				server = &hostEntry{url: &url.URL{}} // server = "": the pulled registry
			}
			dir = hostsDir{server: server}
		}
		var eps []string
		var rewrites map[string]string
		if m != nil {
			eps = m.Endpoints
			if len(m.Rewrites) > 0 {
				rewrites = m.Rewrites
			}
		}
		seen := map[string]bool{}
		for i, raw := range eps {
			name, u, override, err := normalizeEndpoint(raw)
			if err != nil || seen[u.String()] {
				continue // k3s skips an invalid endpoint and a duplicate
			}
			seen[u.String()] = true
			ep := hostEntry{url: u, overridePath: override, config: endpointConfig(f, name), rewrites: rewrites}
			// The last endpoint, when it is the server's own URL, becomes
			// the server rather than a mirror of itself.
			if i == len(eps)-1 && dir.server != nil && dir.server.url != nil && dir.server.url.String() == u.String() {
				dir.server = &ep
				continue
			}
			dir.endpoints = append(dir.endpoints, ep)
		}
		dirs[dirName(host)] = dir
	}

	// A directory that says nothing but the registry's own URL is not
	// written.
	for name, dir := range dirs {
		if len(dir.endpoints) == 0 && !dir.server.hasConfig() {
			delete(dirs, name)
		}
	}
	return dirs
}

func dirName(host string) string {
	if host == "*" {
		return "_default"
	}
	return host
}

// serverOf is the server of host's directory (k3s defaultHostConfig):
// the registry's own URL, none for "*".
func serverOf(host string, c configSpec) (*hostEntry, error) {
	_, u, _, err := normalizeEndpoint(host)
	if err != nil {
		return nil, err
	}
	if host == "*" {
		u = nil
	}
	return &hostEntry{url: u, config: c}, nil
}

// endpointConfig is the configs entry of an endpoint's registry (k3s
// configForHost): registry-1.docker.io's entry for docker.io if there is
// one, else the name's own.
func endpointConfig(f *registriesFile, name string) configSpec {
	if h := defaultHost(name); h != name {
		if c := f.Configs[h]; c != nil {
			return *c
		}
	}
	if c := f.Configs[name]; c != nil {
		return *c
	}
	return configSpec{}
}

// normalizeEndpoint is k3s's normalizeEndpointAddress: the registry an
// endpoint names (docker.io for registry-1.docker.io), its URL (https
// unless it says otherwise, but http for a loopback host on a port other
// than 443; docker.io's host is registry-1.docker.io; no path, "/" or
// "/v2" is /v2) and whether its path overrides the API root.
func normalizeEndpoint(endpoint string) (string, *url.URL, bool, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "//" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", nil, false, err
	}
	if u.Scheme == "" {
		u.Scheme = "https"
		if port := u.Port(); isLocalhost(u.Host) && port != "" && port != "443" {
			u.Scheme = "http"
		}
	}
	name := u.Host
	u.Host = defaultHost(name)
	if u.Host == "registry-1.docker.io" {
		name = "docker.io"
	}
	switch u.Path {
	case "", "/", "/v2":
		u.Path = "/v2"
		return name, u, false, nil
	}
	return name, u, true, nil
}

// defaultHost is containerd's DefaultHost: the host that serves a
// registry.
func defaultHost(registry string) string {
	if registry == "docker.io" {
		return "registry-1.docker.io"
	}
	return registry
}

// isLocalhost is containerd's IsLocalhost: localhost or a loopback
// address, with or without a port.
func isLocalhost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
