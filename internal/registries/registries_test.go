package registries_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/registries"
)

// short is an endpoint in one line: schemes, URL, repository, ns,
// whether credentials and TLS settings go with it.
func short(e registries.Endpoint) string {
	s := strings.Join(e.Schemes, "+") + " " + e.URL.Host + e.URL.Path + " " + e.Repository
	if e.Namespace != "" {
		s += " ns=" + e.Namespace
	}
	if e.Auth != nil {
		s += " auth"
	}
	if e.TLS != nil {
		s += " tls"
	}
	if e.InsecureSkipVerify {
		s += " skip-verify"
	}
	return s
}

func resolve(t *testing.T, yaml string, noDefault bool, image string) []string {
	t.Helper()
	var c *registries.Config
	if yaml != "" {
		var err error
		c, err = registries.Parse("registries.yaml", []byte(yaml))
		require.NoError(t, err)
		c.NoDefaultEndpoint = noDefault
	}
	img, err := registries.ParseImage(image)
	require.NoError(t, err)
	var out []string
	for _, e := range c.Resolve(img) {
		out = append(out, short(e))
	}
	return out
}

func TestParseImage(t *testing.T) {
	for ref, want := range map[string]string{
		"nginx":                           "docker.io/library/nginx:latest",
		"library/nginx:1.27":              "docker.io/library/nginx:1.27",
		"index.docker.io/rancher/rke2:v1": "docker.io/rancher/rke2:v1",
		"docker.io/rancher/rke2:v1":       "docker.io/rancher/rke2:v1",
		"localhost/app:1":                 "localhost/app:1",
		"reg.example.com:5000/a/b/c:2":    "reg.example.com:5000/a/b/c:2",
		"rancher/harvester:v1.4.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": "docker.io/rancher/harvester:v1.4.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	} {
		img, err := registries.ParseImage(ref)
		require.NoError(t, err, ref)
		assert.Equal(t, want, img.String(), ref)
	}
	img, err := registries.ParseImage("app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	assert.Equal(t, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", img.Ref(), "a digest is pulled by digest")
	assert.Empty(t, img.Tag)
	for _, bad := range []string{"", "app/UPPER", "app:bad tag", "app@sha256:short"} {
		_, err := registries.ParseImage(bad)
		assert.Error(t, err, bad)
	}
}

// Each case is what k3s writes into containerd's hosts.toml for the file,
// and containerd then tries, in order.
func TestResolve(t *testing.T) {
	cases := []struct {
		name, yaml string
		noDefault  bool
		image      string
		want       []string
	}{
		{"no file: the registry itself", "", false, "nginx",
			[]string{"https registry-1.docker.io/v2 library/nginx"}},
		{"no file: a loopback registry is tried https then http, unverified", "", false, "127.0.0.1:5000/app:1",
			[]string{"https+http 127.0.0.1:5000/v2 app skip-verify"}},
		{"a mirror, then the registry", "mirrors:\n  docker.io:\n    endpoint: [\"https://m.example.com:5000\"]\n", false, "nginx:1",
			[]string{"https m.example.com:5000/v2 library/nginx ns=docker.io", "https registry-1.docker.io/v2 library/nginx"}},
		{"--disable-default-registry-endpoint: the mirror only", "mirrors:\n  docker.io:\n    endpoint: [\"https://m.example.com:5000\"]\n", true, "nginx:1",
			[]string{"https m.example.com:5000/v2 library/nginx ns=docker.io"}},
		{"--disable-default-registry-endpoint leaves an unmirrored registry alone", "mirrors:\n  docker.io:\n    endpoint: [\"m.example.com\"]\n", true, "quay.io/a/b:1",
			[]string{"https quay.io/v2 a/b"}},
		{"no scheme: https, http for loopback on a port", "mirrors:\n  r.example.com:\n    endpoint: [\"127.0.0.1:5001\", \"localhost:443\", \"m2.example.com\"]\n", false, "r.example.com/app:1",
			[]string{"http 127.0.0.1:5001/v2 app ns=r.example.com", "https localhost:443/v2 app ns=r.example.com", "https m2.example.com/v2 app ns=r.example.com", "https r.example.com/v2 app"}},
		{"duplicates dropped; the registry listed last is its own endpoint", "mirrors:\n  r.example.com:\n    endpoint: [\"https://m.example.com\", \"https://m.example.com/v2\", \"https://r.example.com\"]\n", false, "r.example.com/app:1",
			[]string{"https m.example.com/v2 app ns=r.example.com", "https r.example.com/v2 app"}},
		{"an override path is the API root", "mirrors:\n  docker.io:\n    endpoint: [\"https://harbor.example.com/v2/proxy\", \"https://m.example.com/prefix\"]\n", false, "nginx",
			[]string{"https harbor.example.com/v2/proxy library/nginx ns=docker.io", "https m.example.com/prefix library/nginx ns=docker.io", "https registry-1.docker.io/v2 library/nginx"}},
		{"*: for a registry with no entry of its own", "mirrors:\n  \"*\":\n    endpoint: [\"https://all.example.com\"]\n  docker.io:\n    endpoint: [\"https://hub.example.com\"]\n", false, "quay.io/a/b:1",
			[]string{"https all.example.com/v2 a/b ns=quay.io", "https quay.io/v2 a/b"}},
		{"*: a loopback registry reached through mirrors.*'s server is tried as containerd fills it: https then http, unverified", "mirrors:\n  \"*\":\n    endpoint: [\"https://all.example.com\"]\n", false, "127.0.0.1:5000/app:1",
			[]string{"https all.example.com/v2 app ns=127.0.0.1:5000", "https+http 127.0.0.1:5000/v2 app skip-verify"}},
		{"configs.* alone: a loopback registry as containerd fills it", "configs:\n  \"*\":\n    auth:\n      username: u\n      password: p\n", false, "127.0.0.1:5000/app:1",
			[]string{"https+http 127.0.0.1:5000/v2 app skip-verify"}},
		{"no file: localhost on 443 is https only, on 80 http only", "", false, "localhost:80/app:1",
			[]string{"http localhost:80/v2 app"}},
		{"*: not for a registry with its own", "mirrors:\n  \"*\":\n    endpoint: [\"https://all.example.com\"]\n  docker.io:\n    endpoint: [\"https://hub.example.com\"]\n", false, "nginx",
			[]string{"https hub.example.com/v2 library/nginx ns=docker.io", "https registry-1.docker.io/v2 library/nginx"}},
		{"*: not for a registry that has a configs entry", "mirrors:\n  \"*\":\n    endpoint: [\"https://all.example.com\"]\nconfigs:\n  quay.io:\n    tls:\n      insecure_skip_verify: true\n", false, "quay.io/a/b:1",
			[]string{"https quay.io/v2 a/b tls skip-verify"}},
		{"a mirror with no endpoints is no entry", "mirrors:\n  docker.io: {}\n  \"*\":\n    endpoint: [\"https://all.example.com\"]\n", false, "nginx",
			[]string{"https all.example.com/v2 library/nginx ns=docker.io", "https registry-1.docker.io/v2 library/nginx"}},
		{"rewrite: on the mirror, never on the registry", "mirrors:\n  docker.io:\n    endpoint: [\"https://m.example.com\"]\n    rewrite:\n      \"^rancher/(.*)\": \"mirrored/rancher/$1\"\n", false, "rancher/harvester:v1.4.0",
			[]string{"https m.example.com/v2 mirrored/rancher/harvester ns=docker.io", "https registry-1.docker.io/v2 rancher/harvester"}},
		{"rewrite: never on the registry listed last as a mirror endpoint (it is the server)", "mirrors:\n  r.example.com:\n    endpoint: [\"https://m.example.com\", \"https://r.example.com\"]\n    rewrite:\n      \"^app$\": \"other/app\"\n", false, "r.example.com/app:1",
			[]string{"https m.example.com/v2 other/app ns=r.example.com", "https r.example.com/v2 app"}},
		{"rewrite: the first pattern that changes the repository", "mirrors:\n  docker.io:\n    endpoint: [\"https://m.example.com\"]\n    rewrite:\n      \"^nomatch/(.*)\": \"x/$1\"\n      \"^library/(.*)\": \"hub/$1\"\n", false, "nginx",
			[]string{"https m.example.com/v2 hub/nginx ns=docker.io", "https registry-1.docker.io/v2 library/nginx"}},
		{"http endpoint with TLS settings: https first", "mirrors:\n  r.example.com:\n    endpoint: [\"http://m.example.com:5000\"]\nconfigs:\n  m.example.com:5000:\n    tls:\n      ca_file: /etc/ca.pem\n", false, "r.example.com/app:1",
			[]string{"https+http m.example.com:5000/v2 app ns=r.example.com tls", "https r.example.com/v2 app"}},
		{"credentials by the endpoint's host", "mirrors:\n  r.example.com:\n    endpoint: [\"https://m.example.com\"]\nconfigs:\n  m.example.com:\n    auth:\n      username: u\n      password: p\n", false, "r.example.com/app:1",
			[]string{"https m.example.com/v2 app ns=r.example.com auth", "https r.example.com/v2 app"}},
		{"docker.io's credentials for registry-1.docker.io", "configs:\n  docker.io:\n    auth:\n      username: u\n      password: p\n", false, "nginx",
			[]string{"https registry-1.docker.io/v2 library/nginx auth"}},
		{"configs.* gives TLS to every registry without an entry, never credentials", "configs:\n  \"*\":\n    auth:\n      username: u\n      password: p\n    tls:\n      insecure_skip_verify: true\n", false, "quay.io/a/b:1",
			[]string{"https quay.io/v2 a/b tls skip-verify"}},
		{"configs.* is lost where mirrors.* is", "mirrors:\n  \"*\":\n    endpoint: [\"https://all.example.com\"]\nconfigs:\n  \"*\":\n    tls:\n      insecure_skip_verify: true\n", false, "quay.io/a/b:1",
			[]string{"https all.example.com/v2 a/b ns=quay.io", "https quay.io/v2 a/b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, resolve(t, c.yaml, c.noDefault, c.image))
		})
	}
}

func TestParseBadInput(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"mirrors: [a]", "registries.yaml:1: mirrors: want a map"},
		{"mirror:\n  docker.io: {}\n", `registries.yaml:1: mirror: unknown field (want one of mirrors, configs, auths)`},
		{"mirrors:\n  docker.io:\n    endpoints: [x]\n", `registries.yaml:3: mirrors["docker.io"].endpoints: unknown field (want one of endpoint, rewrite)`},
		{"mirrors:\n  docker.io:\n    endpoint: [\"ftp://m\"]\n", `registries.yaml:3: mirrors["docker.io"].endpoint[1]: not an endpoint URL: scheme "ftp"`},
		{"mirrors:\n  docker.io:\n    endpoint: [\"https://\"]\n", `registries.yaml:3: mirrors["docker.io"].endpoint[1]: not an endpoint URL: "https://" names no host`},
		{"mirrors:\n  docker.io:\n    rewrite:\n      \"^(a\": b\n", `registries.yaml:4: mirrors["docker.io"].rewrite["^(a"]: not a regular expression`},
		{"configs:\n  m:\n    auth:\n      token: x\n", "registries.yaml:4: configs.m.auth.token: unknown field (want one of username, password, auth, identity_token)"},
		{"configs:\n  m:\n    tls:\n      cert_file: /c.pem\n", "registries.yaml:4: configs.m.tls: cert_file and key_file go together"},
		{"configs:\n  m:\n    tls:\n      insecure_skip_verify: maybe\n", "registries.yaml:4: configs.m.tls.insecure_skip_verify"},
		{"mirrors: {\n", "registries.yaml"},
	} {
		_, err := registries.Parse("registries.yaml", []byte(c.yaml))
		require.Error(t, err, c.yaml)
		assert.Contains(t, err.Error(), c.want, c.yaml)
		assert.True(t, errors.Is(err, outcome.ErrBadInput), "bad input: %v", err)
	}
	for _, empty := range []string{"", "# nothing\n", "---\n"} {
		c, err := registries.Parse("registries.yaml", []byte(empty))
		require.NoError(t, err, "%q", empty)
		assert.Empty(t, c.Mirrors)
	}
}

// A credential never shows in what the package prints.
func TestAuthNeverPrinted(t *testing.T) {
	c, err := registries.Parse("registries.yaml", []byte("mirrors:\n  r.example.com:\n    endpoint: [\"https://m.example.com\"]\n"+
		"configs:\n  m.example.com:\n    auth:\n      username: operator\n      password: s3cr3t-pa55\n"))
	require.NoError(t, err)
	img, err := registries.ParseImage("r.example.com/app:1")
	require.NoError(t, err)
	for _, e := range c.Resolve(img) {
		for _, s := range []string{e.String(), fmt.Sprint(e.Auth), fmt.Sprintf("%v", e)} {
			assert.NotContains(t, s, "s3cr3t-pa55")
		}
	}
}
