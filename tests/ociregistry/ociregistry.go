// Package ociregistry runs a real OCI registry on loopback for the tests:
// the CNCF distribution registry (github.com/distribution/distribution/v3,
// the reference implementation, the one Helm's own tests use), in memory,
// served over TLS with a CA of its own, optionally behind htpasswd
// authentication, and pushes into it charts with Helm's registry client,
// as `helm push` does, and images (random layers, the platforms asked
// for, an index for several) with go-containerregistry, as crane does.
package ociregistry

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/distribution/distribution/v3/configuration"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd" // htpasswd authentication
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // the in-memory storage driver
	"github.com/sirupsen/logrus"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"
)

// Registry is a running registry.
type Registry struct {
	srv *httptest.Server
	// Host is host:port of the registry.
	Host string
	// CAFile is a PEM file of the certificate authority of its TLS
	// certificate, for --ca-file.
	CAFile string
	client *registry.Client
	users  map[string]string

	mu    sync.Mutex
	asked map[string]int // "METHOD what" → count, what is ping, manifest or blob
}

// Options are how a registry runs.
type Options struct {
	// Users, when set, are the only ones it serves (htpasswd
	// authentication: HTTP basic, as distribution does it), by name.
	Users map[string]string
}

// Start starts a registry; dir receives its CA file (and htpasswd file).
// Close stops it.
func Start(ctx context.Context, dir string, opts ...Options) (*Registry, error) {
	logrus.SetOutput(io.Discard) // the registry logs every request through logrus
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if len(o.Users) > 0 {
		path, err := writeHtpasswd(dir, o.Users)
		if err != nil {
			return nil, err
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "test-registry", "path": path}}
	}
	app := handlers.NewApp(ctx, cfg)
	r := &Registry{asked: map[string]int{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.count(req)
		app.ServeHTTP(w, req)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	r.srv, r.Host, r.CAFile = srv, strings.TrimPrefix(srv.URL, "https://"), filepath.Join(dir, "registry-ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(r.CAFile, pemData, 0o600); err != nil {
		srv.Close()
		return nil, err
	}
	c, err := registry.NewClient(registry.ClientOptHTTPClient(srv.Client()), registry.ClientOptEnableCache(false),
		registry.ClientOptCredentialsFile(filepath.Join(dir, "registry-credentials.json")))
	if err != nil {
		srv.Close()
		return nil, err
	}
	r.client = c
	r.users = o.Users
	return r, nil
}

// Close stops the registry.
func (r *Registry) Close() { r.srv.Close() }

// count notes a request by method and by what it asks: the ping
// (/v2/), a manifest or a blob; anything else is not counted.
func (r *Registry) count(req *http.Request) {
	what := ""
	switch p := req.URL.Path; {
	case p == "/v2/" || p == "/v2":
		what = "ping"
	case strings.Contains(p, "/manifests/"):
		what = "manifest"
	case strings.Contains(p, "/blobs/") && !strings.Contains(p, "/blobs/uploads"):
		what = "blob"
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[req.Method+" "+what]++
}

// Asked returns the requests counted since the last call ("GET
// manifest" → 2, "HEAD manifest" → 1, "GET blob", "GET ping" …) and
// starts counting again.
func (r *Registry) Asked() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.asked
	r.asked = map[string]int{}
	return out
}

// Push pushes the chart archive (.tgz) at path as `helm push PATH
// oci://HOST/REPO` does: REPO/<name>:<version>.
func (r *Registry) Push(path, repo string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	c, err := loader.LoadArchive(strings.NewReader(string(data)))
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("%s/%s/%s:%s", r.Host, repo, c.Name(), strings.ReplaceAll(c.Metadata.Version, "+", "_"))
	_, err = r.client.Push(data, ref)
	return err
}
