package imagecheck_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/imagecheck"
	"github.com/chart-upgrader/chart-upgrader/internal/registries"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
)

// world is three real registries on loopback, each with TLS of its own
// CA: the origin, a mirror and a private one behind htpasswd.
type world struct {
	origin, mirror, private *ociregistry.Registry
	dir                     string
	digest                  string // of origin's app:2.0.0
}

const password = "s3cr3t-pa55w0rd"

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{dir: t.TempDir()}
	start := func(sub string, opts ...ociregistry.Options) *ociregistry.Registry {
		dir := filepath.Join(w.dir, sub)
		require.NoError(t, os.Mkdir(dir, 0o700))
		r, err := ociregistry.Start(context.Background(), dir, opts...)
		require.NoError(t, err)
		t.Cleanup(r.Close)
		return r
	}
	w.origin, w.mirror = start("origin"), start("mirror")
	w.private = start("private", ociregistry.Options{Users: map[string]string{"puller": password}})
	var err error
	w.digest, err = w.origin.PushImage("app", "2.0.0", "linux/amd64", "linux/arm64")
	require.NoError(t, err)
	_, err = w.origin.PushImage("arm-only", "1.0", "linux/arm64")
	require.NoError(t, err)
	_, err = w.origin.PushImage("amd-only", "1.0", "linux/amd64")
	require.NoError(t, err)
	for _, repo := range []string{"app", "library/nginx", "mirrored/app"} {
		_, err = w.mirror.PushImage(repo, "2.0.0", "linux/amd64")
		require.NoError(t, err)
	}
	_, err = w.private.PushImage("secret-app", "1.0", "linux/amd64")
	require.NoError(t, err)
	return w
}

// registries is a registries.yaml trusting the three registries' CAs,
// with more lines.
func (w *world) registries(t *testing.T, more string) *imagecheck.Registries {
	t.Helper()
	text := "configs:\n"
	for _, r := range []*ociregistry.Registry{w.origin, w.mirror, w.private} {
		text += fmt.Sprintf("  %q:\n    tls:\n      ca_file: %s\n", r.Host, r.CAFile)
		if r == w.private && strings.Contains(more, "#private-auth") {
			text += "    auth:\n      username: puller\n      password: " + password + "\n"
		}
	}
	text += more
	path := filepath.Join(t.TempDir(), "registries.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	r, err := imagecheck.LoadRegistries(path, "/nonexistent-host-root")
	require.NoError(t, err)
	return r
}

func pull(t *testing.T, p *imagecheck.Puller, ref string, cri authn.Authenticator) imagecheck.Pulled {
	t.Helper()
	img, err := registries.ParseImage(ref)
	require.NoError(t, err)
	return p.Pull(t.Context(), img, cri)
}

// answers is each endpoint asked and what it said, in one line each.
func answers(p imagecheck.Pulled) []string {
	var out []string
	for _, a := range p.Tried {
		s := a.Endpoint.URL.Host + " " + a.Endpoint.Repository + ": "
		if a.Found {
			s += "found " + strings.Join(a.Platforms, ",")
		} else {
			s += a.Said
		}
		out = append(out, s)
	}
	return out
}

func TestPull(t *testing.T) {
	w := newWorld(t)
	mirrors := fmt.Sprintf("mirrors:\n  registry.example.invalid:\n    endpoint: [\"https://%s\"]\n  docker.io:\n    endpoint: [\"https://%s\"]\n"+
		"  rewritten.example.invalid:\n    endpoint: [\"https://%s\"]\n    rewrite:\n      \"^(app)$\": \"mirrored/$1\"\n", w.mirror.Host, w.mirror.Host, w.mirror.Host)
	p := imagecheck.NewPuller(w.registries(t, mirrors), 0)
	defer p.Close()
	o, m := w.origin.Host, w.mirror.Host
	cases := []struct {
		name, ref string
		want      []string
	}{
		{"an index", o + "/app:2.0.0", []string{o + " app: found linux/amd64,linux/arm64"}},
		{"by digest", o + "/app@" + w.digest, []string{o + " app: found linux/amd64,linux/arm64"}},
		{"an image manifest: its config's platform", o + "/arm-only:1.0", []string{o + " arm-only: found linux/arm64"}},
		{"a tag missing", o + "/app:9.9.9", []string{o + " app: MANIFEST_UNKNOWN: manifest unknown (HTTP 404)"}},
		{"a digest missing", o + "/app@sha256:" + strings.Repeat("0", 64), []string{o + " app: MANIFEST_UNKNOWN: manifest unknown (HTTP 404)"}},
		{"a repository missing (distribution v3 says so of the manifest)", o + "/nothere:1", []string{o + " nothere: MANIFEST_UNKNOWN: manifest unknown (HTTP 404)"}},
		{"through the mirror", "registry.example.invalid/app:2.0.0", []string{m + " app: found linux/amd64"}},
		{"a short name through the mirror", "nginx:2.0.0", []string{m + " library/nginx: found linux/amd64"}},
		{"missing on the mirror, then the registry itself", "registry.example.invalid/app:7.7.7", []string{
			m + " app: MANIFEST_UNKNOWN: manifest unknown (HTTP 404)",
			"registry.example.invalid app: dial tcp: lookup registry.example.invalid"}},
		{"rewritten on the mirror", "rewritten.example.invalid/app:2.0.0", []string{m + " mirrored/app: found linux/amd64"}},
		{"a host nothing resolves", "nowhere.invalid/x:1", []string{"nowhere.invalid x: dial tcp: lookup nowhere.invalid"}},
		{"private without credentials", w.private.Host + "/secret-app:1.0", []string{w.private.Host + " secret-app: UNAUTHORIZED: authentication required (HTTP 401)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := answers(pull(t, p, c.ref, nil))
			require.Len(t, got, len(c.want), "%v", got)
			for i := range c.want {
				assert.Contains(t, got[i], c.want[i])
			}
		})
	}

	// asked again: the answers of the run, no request
	before := p.Requests()
	pull(t, p, o+"/app:2.0.0", nil)
	pull(t, p, "registry.example.invalid/app:7.7.7", nil)
	assert.Equal(t, before, p.Requests(), "an endpoint's answer is asked once per run")

	// the private registry with registries.yaml's credentials, and with
	// the pod's (which the node then uses on every endpoint)
	withAuth := imagecheck.NewPuller(w.registries(t, "#private-auth\n"), 0)
	defer withAuth.Close()
	assert.Equal(t, []string{w.private.Host + " secret-app: found linux/amd64"}, answers(pull(t, withAuth, w.private.Host+"/secret-app:1.0", nil)))
	assert.Equal(t, []string{w.private.Host + " secret-app: found linux/amd64"},
		answers(pull(t, p, w.private.Host+"/secret-app:1.0", &authn.Basic{Username: "puller", Password: password})))
	wrong := answers(pull(t, withAuth, w.private.Host+"/secret-app:1.0", &authn.Basic{Username: "puller", Password: "wrong"}))
	assert.Contains(t, wrong[0], "(HTTP 401)", "the pod's credentials win over registries.yaml's")
	for _, s := range wrong {
		assert.NotContains(t, s, password)
	}
}

// A registry behind a port nobody listens on answers nothing: the
// connection refused is what it said; an http:// endpoint with TLS
// settings is tried over HTTPS first, as containerd does.
func TestPullSchemes(t *testing.T) {
	w := newWorld(t)
	more := fmt.Sprintf("mirrors:\n  registry.example.invalid:\n    endpoint: [\"https://127.0.0.1:1\", \"http://%s\"]\n", w.mirror.Host)
	p := imagecheck.NewPuller(w.registries(t, more), 0)
	defer p.Close()
	got := answers(pull(t, p, "registry.example.invalid/app:2.0.0", nil))
	require.Len(t, got, 2, "%v", got)
	assert.Contains(t, got[0], "connection refused")
	assert.Contains(t, got[1], "found linux/amd64", "over HTTPS, since the host has TLS settings")
}

// What one check of an image costs at the registry, counted there, by
// method, never a layer. By default a manifest GET (the body is needed:
// an index's platforms, or an image manifest's config digest, whose blob
// says a single-platform image's platform). With HeadsFirst
// (--image-manifests=head) a HEAD, and a GET only of an index (or to
// have a refusal in the registry's words): on Docker Hub a manifest GET
// counts as a pull and a HEAD does not, so a single-platform tag costs
// no pull, and its platform is not read.
func TestWhatACheckAsksTheRegistry(t *testing.T) {
	w := newWorld(t)
	o := w.origin.Host
	cases := []struct {
		name, ref  string
		headsFirst bool
		want       map[string]int
		answer     string
	}{
		{"an index", o + "/app:2.0.0", false, map[string]int{"GET ping": 1, "GET manifest": 1}, "found linux/amd64,linux/arm64"},
		{"an index by digest", o + "/app@" + w.digest, false, map[string]int{"GET ping": 1, "GET manifest": 1}, "found linux/amd64,linux/arm64"},
		{"a single-platform tag", o + "/arm-only:1.0", false, map[string]int{"GET ping": 1, "GET manifest": 1, "GET blob": 1}, "found linux/arm64"},
		{"a tag missing", o + "/app:9.9.9", false, map[string]int{"GET ping": 1, "GET manifest": 1}, "MANIFEST_UNKNOWN: manifest unknown (HTTP 404)"},
		{"heads first: a single-platform tag", o + "/arm-only:1.0", true, map[string]int{"GET ping": 1, "HEAD manifest": 1}, "found "},
		{"heads first: an index", o + "/app:2.0.0", true, map[string]int{"GET ping": 1, "HEAD manifest": 1, "GET manifest": 1}, "found linux/amd64,linux/arm64"},
		{"heads first: a tag missing", o + "/app:9.9.9", true, map[string]int{"GET ping": 1, "HEAD manifest": 1, "GET manifest": 1}, "MANIFEST_UNKNOWN: manifest unknown (HTTP 404)"},
	}
	w.origin.Asked() // the pushes
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := imagecheck.NewPuller(w.registries(t, ""), 0)
			p.HeadsFirst = c.headsFirst
			defer p.Close()
			got := pull(t, p, c.ref, nil)
			pull(t, p, c.ref, nil) // asked again in the run: nothing more
			assert.Equal(t, c.want, w.origin.Asked())
			repo := strings.TrimPrefix(c.ref, o+"/")
			repo = repo[:strings.IndexAny(repo, ":@")]
			assert.Equal(t, []string{o + " " + repo + ": " + c.answer}, answers(got))
			if c.headsFirst && got.Found != nil && !got.Found.Index {
				assert.True(t, got.Found.PlatformNotRead)
				assert.NotEmpty(t, got.Found.Digest, "the HEAD's digest")
			}
		})
	}
}
