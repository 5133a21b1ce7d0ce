package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/platforms"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
)

// describe is a host as the cases write it: URL (API root), "+fallback"
// when https is tried before http, "+unverified" when it skips
// verification, "+ns" when asked with ?ns=.
func describe(h host, registry string) string {
	s := h.scheme + "://" + h.host + h.root
	if h.fallback {
		s += " +fallback"
	}
	if h.tls.InsecureSkipVerify {
		s += " +unverified"
	}
	if isProxy(registry, h.host) {
		s += " +ns"
	}
	return s
}

// The hosts containerd asks for a registry, in order, from what k3s
// wrote.
func TestPullOrder(t *testing.T) {
	for _, c := range []struct {
		name, registries string
		noDefault        bool
		registry         string
		want             []string
	}{
		{"no registries.yaml: docker.io", "", false, "docker.io", []string{"https://registry-1.docker.io/v2"}},
		{"no registries.yaml: a registry", "", false, "r.example", []string{"https://r.example/v2"}},
		{"no registries.yaml: loopback on a port: https unverified, then http", "", false, "127.0.0.1:5000",
			[]string{"https://127.0.0.1:5000/v2 +fallback +unverified"}},
		{"no registries.yaml: localhost on 443", "", false, "localhost:443", []string{"https://localhost:443/v2 +unverified"}},
		{"no registries.yaml: localhost on 80: http only", "", false, "localhost:80", []string{"http://localhost:80/v2"}},
		{"a mirror, then the registry", "mirrors:\n  docker.io:\n    endpoint: [\"m.example:5000/prefix\"]\n", false, "docker.io",
			[]string{"https://m.example:5000/prefix +ns", "https://registry-1.docker.io/v2"}},
		{"a mirror with no default endpoint", "mirrors:\n  docker.io:\n    endpoint: [\"m.example\"]\n", true, "docker.io",
			[]string{"https://m.example/v2 +ns"}},
		{"the registry listed last is the server", "mirrors:\n  r.example:\n    endpoint: [\"m.example\", \"r.example\"]\n", false, "r.example",
			[]string{"https://m.example/v2 +ns", "https://r.example/v2"}},
		{"the registry listed first stays a mirror", "mirrors:\n  r.example:\n    endpoint: [\"r.example\", \"m.example\"]\n", false, "r.example",
			[]string{"https://r.example/v2", "https://m.example/v2 +ns", "https://r.example/v2"}},
		{"\"*\" for a registry with no directory of its own", "mirrors:\n  \"*\":\n    endpoint: [\"m.example\"]\n  r.example:\n    endpoint: [\"n.example\"]\n", false, "s.example",
			[]string{"https://m.example/v2 +ns", "https://s.example/v2"}},
		{"a registry's own directory before \"*\"", "mirrors:\n  \"*\":\n    endpoint: [\"m.example\"]\n  r.example:\n    endpoint: [\"n.example\"]\n", false, "r.example",
			[]string{"https://n.example/v2 +ns", "https://r.example/v2"}},
		{"\"*\"'s server for a loopback registry: containerd's default, unverified", "mirrors:\n  \"*\":\n    endpoint: [\"m.example\"]\n", false, "127.0.0.1:5000",
			[]string{"https://m.example/v2 +ns", "https://127.0.0.1:5000/v2 +fallback +unverified"}},
		{"configs.\"*\" with credentials only, for a loopback registry: containerd's default", "configs:\n  \"*\":\n    auth: {username: u, password: p}\n", false, "127.0.0.1:5000",
			[]string{"https://127.0.0.1:5000/v2 +fallback +unverified"}},
		{"configs.\"*\": the registry with its TLS", "configs:\n  \"*\":\n    tls: {insecure_skip_verify: true}\n", false, "s.example",
			[]string{"https://s.example/v2 +unverified"}},
		{"a loopback registry with a CA: http with TLS, https first", "configs:\n  127.0.0.1:5000:\n    tls: {ca_file: /ca.pem}\n", false, "127.0.0.1:5000",
			[]string{"https://127.0.0.1:5000/v2 +fallback"}},
		{"a loopback registry with credentials only: http", "configs:\n  127.0.0.1:5000:\n    auth: {username: u, password: p}\n", false, "127.0.0.1:5000",
			[]string{"http://127.0.0.1:5000/v2"}},
		{"an http mirror with TLS settings", "mirrors:\n  r.example:\n    endpoint: [\"http://m.example:5000\"]\nconfigs:\n  m.example:5000:\n    tls: {insecure_skip_verify: true}\n",
			false, "r.example", []string{"https://m.example:5000/v2 +fallback +unverified +ns", "https://r.example/v2"}},
		{"an http mirror on port 80 with TLS settings: http", "mirrors:\n  r.example:\n    endpoint: [\"http://m.example:80\"]\nconfigs:\n  m.example:80:\n    tls: {insecure_skip_verify: true}\n",
			false, "r.example", []string{"http://m.example:80/v2 +unverified +ns", "https://r.example/v2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f registriesFile
			require.NoError(t, yaml.Unmarshal([]byte(c.registries), &f))
			n := &node{dirs: hosts(&f, c.noDefault), configs: f.Configs}
			var got []string
			for _, h := range n.hosts(c.registry) {
				got = append(got, describe(h, c.registry))
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// A mirror's rewrites change the repository asked of its endpoints, the
// first that changes it; never the server's.
func TestRewrites(t *testing.T) {
	var f registriesFile
	require.NoError(t, yaml.Unmarshal([]byte("mirrors:\n  r.example:\n    endpoint: [\"m.example/base\"]\n    rewrite:\n      \"^(app)$\": \"mirrored/$1\"\n      \"[\": \"bad\"\n"), &f))
	n := &node{dirs: hosts(&f, false), configs: f.Configs}
	img, err := parseImage("r.example/app:1")
	require.NoError(t, err)
	var got []string
	for _, h := range n.hosts(img.registry) {
		got = append(got, hostURL(h, h.scheme, img, "manifests", img.object))
	}
	assert.Equal(t, []string{"https://m.example/base/mirrored/app/manifests/1?ns=r.example", "https://r.example/v2/app/manifests/1"}, got)

	img, err = parseImage("nginx")
	require.NoError(t, err)
	assert.Equal(t, image{ref: "docker.io/library/nginx:latest", registry: "docker.io", repository: "library/nginx", object: "latest"}, img)
}

// Credentials: the pull's own on every host, else the host's in
// registries.yaml (registry-1.docker.io's under docker.io), never "*"'s.
func TestCredentials(t *testing.T) {
	var f registriesFile
	require.NoError(t, yaml.Unmarshal([]byte("configs:\n  docker.io:\n    auth: {username: d, password: dp}\n  m.example:\n    auth: {auth: "+
		b64("m:mp")+"}\n  \"*\":\n    auth: {username: any, password: x}\n"), &f))
	n := &node{dirs: hosts(&f, false), configs: f.Configs}
	for host, want := range map[string]string{"registry-1.docker.io": "d:dp", "m.example": "m:mp", "other.example": ":"} {
		u, p, err := n.credentials(nil, host)
		require.NoError(t, err)
		assert.Equal(t, want, u+":"+p, host)
	}
	u, p, err := n.credentials(authn.FromConfig(authn.AuthConfig{Username: "cri", Password: "cp"}), "m.example")
	require.NoError(t, err)
	assert.Equal(t, "cri:cp", u+":"+p)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// The pulls against real registries: TLS with a CA of their own, one
// behind htpasswd, and a plain-http one on loopback.
func TestPull(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func(sub string, opts ...ociregistry.Options) *ociregistry.Registry {
		d := filepath.Join(dir, sub)
		require.NoError(t, os.Mkdir(d, 0o700))
		r, err := ociregistry.Start(ctx, d, opts...)
		require.NoError(t, err)
		t.Cleanup(r.Close)
		return r
	}
	origin, mirror := start("origin"), start("mirror")
	private := start("private", ociregistry.Options{Users: map[string]string{"u": "pw"}})
	for _, p := range []struct {
		r         *ociregistry.Registry
		repo, tag string
		platforms []string
	}{
		{origin, "app", "1", []string{"linux/amd64", "linux/arm64"}},
		{origin, "arm", "1", []string{"linux/arm64"}},
		{origin, "i386", "1", []string{"linux/386"}},
		{mirror, "mirrored/app", "2", []string{"linux/amd64"}},
		{private, "app", "1", []string{"linux/amd64"}},
	} {
		_, err := p.r.PushImage(p.repo, p.tag, p.platforms...)
		require.NoError(t, err)
	}
	plain := plainRegistry(t)

	var b strings.Builder
	fmt.Fprintf(&b, "mirrors:\n  r.example.invalid:\n    endpoint: [\"https://%s\"]\n    rewrite: {\"^app$\": \"mirrored/app\"}\nconfigs:\n", mirror.Host)
	fmt.Fprintf(&b, "  %q:\n    tls: {ca_file: %s}\n", origin.Host, origin.CAFile)
	fmt.Fprintf(&b, "  %q:\n    tls: {ca_file: %s}\n", mirror.Host, mirror.CAFile)
	fmt.Fprintf(&b, "  %q:\n    tls: {ca_file: %s}\n", private.Host, private.CAFile)
	path := filepath.Join(dir, "registries.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	withAuth := strings.Replace(b.String(), fmt.Sprintf("  %q:\n", private.Host), fmt.Sprintf("  %q:\n    auth: {username: u, password: pw}\n", private.Host), 1)
	authPath := filepath.Join(dir, "registries-auth.yaml")
	require.NoError(t, os.WriteFile(authPath, []byte(withAuth), 0o600))

	amd64 := platforms.Platform{OS: "linux", Architecture: "amd64"}
	cri := authn.FromConfig(authn.AuthConfig{Username: "u", Password: "pw"})
	wrong := authn.FromConfig(authn.AuthConfig{Username: "u", Password: "nope"})
	for _, c := range []struct {
		name, registries, image string
		cri                     authn.Authenticator
		platform                platforms.Platform
		says                    string // "": pulls
	}{
		{"an index holding the platform", path, origin.Host + "/app:1", nil, amd64, ""},
		{"an index for arm64 on arm64", path, origin.Host + "/app:1", nil, platforms.Platform{OS: "linux", Architecture: "arm64"}, ""},
		{"an image for another platform", path, origin.Host + "/arm:1", nil, amd64,
			`rpc error: code = NotFound desc = failed to pull and unpack image "` + origin.Host + `/arm:1": no match for platform in manifest: not found`},
		{"linux/386 runs on amd64", path, origin.Host + "/i386:1", nil, amd64, ""},
		{"a tag the registry lacks", path, origin.Host + "/app:9", nil, amd64,
			`rpc error: code = NotFound desc = failed to pull and unpack image "` + origin.Host + `/app:9": failed to resolve reference "` + origin.Host + `/app:9": ` + origin.Host + `/app:9: not found`},
		{"no registries.yaml: loopback, unverified", "", origin.Host + "/app:1", nil, amd64, ""},
		{"rewritten on the mirror", path, "r.example.invalid/app:2", nil, amd64, ""},
		{"missing on the mirror, the registry unknown: the 404 is reported", path, "r.example.invalid/app:3", nil, amd64,
			`rpc error: code = NotFound desc = failed to pull and unpack image "r.example.invalid/app:3": failed to resolve reference "r.example.invalid/app:3": r.example.invalid/app:3: not found`},
		{"private, no credentials", path, private.Host + "/app:1", nil, amd64,
			"pull access denied, repository does not exist or may require authorization: authorization failed: no basic auth credentials"},
		{"private, credentials in registries.yaml", authPath, private.Host + "/app:1", nil, amd64, ""},
		{"private, the pod's credentials", path, private.Host + "/app:1", cri, amd64, ""},
		{"private, the pod's credentials win", authPath, private.Host + "/app:1", wrong, amd64, "401 Unauthorized"},
		{"a plain-http loopback registry: https, then http", "", plain + "/app:1", nil, amd64, ""},
		{"a host nothing resolves", "", "nowhere.invalid/x:1", nil, amd64, "code = Unknown desc = failed to pull and unpack image \"nowhere.invalid/x:1\": failed to resolve reference \"nowhere.invalid/x:1\": failed to do request: Get \"https://nowhere.invalid/v2/x/manifests/1\": dial tcp: lookup nowhere.invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := newNode(c.registries, false)
			require.NoError(t, err)
			img, err := parseImage(c.image)
			require.NoError(t, err)
			said, err := n.pull(ctx, img, c.platform, c.cri)
			for _, a := range said {
				t.Logf("%s: %d platforms, %v", a.url, len(a.platforms), a.err)
			}
			if c.says == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.says)
		})
	}
}

// plainRegistry serves app:1, one linux/amd64 image, over plain http on
// loopback, asking every request to have no ?ns=.
func plainRegistry(t *testing.T) string {
	config := []byte(`{"os":"linux","architecture":"amd64","rootfs":{"type":"layers","diff_ids":[]}}`)
	sum := sha256.Sum256(config)
	configDigest := "sha256:" + hex.EncodeToString(sum[:])
	manifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":%q,"size":%d},"layers":[]}`,
		mediaOCIManifest, configDigest, len(config))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			http.Error(w, "a query", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/v2/app/manifests/1":
			w.Header().Set("Content-Type", mediaOCIManifest)
			_, _ = w.Write([]byte(manifest))
		case "/v2/app/blobs/" + configDigest:
			_, _ = w.Write(config)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
