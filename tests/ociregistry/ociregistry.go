// Package ociregistry runs a real OCI registry on loopback for the tests:
// the CNCF distribution registry (github.com/distribution/distribution/v3,
// the one Helm's own tests use), in memory, served over TLS, and pushes
// charts into it with Helm's registry client, as `helm push` does.
package ociregistry

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/distribution/v3/configuration"
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
}

// Start starts a registry; dir receives its CA file. Close stops it.
func Start(ctx context.Context, dir string) (*Registry, error) {
	logrus.SetOutput(io.Discard) // the registry logs every request through logrus
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	app := handlers.NewApp(ctx, cfg)
	srv := httptest.NewUnstartedServer(app)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	r := &Registry{srv: srv, Host: strings.TrimPrefix(srv.URL, "https://"), CAFile: filepath.Join(dir, "registry-ca.pem")}
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
	return r, nil
}

// Close stops the registry.
func (r *Registry) Close() { r.srv.Close() }

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
