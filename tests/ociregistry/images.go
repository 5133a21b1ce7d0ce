package ociregistry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"
)

// writeHtpasswd writes users into an htpasswd file in dir, bcrypt as
// distribution wants it.
func writeHtpasswd(dir string, users map[string]string) (string, error) {
	var b strings.Builder
	for user, password := range users {
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s:%s\n", user, hash)
	}
	path := filepath.Join(dir, "htpasswd")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// PushImage pushes repo:tag (a repository of this registry) made of
// random layers for platforms ("linux/amd64", "linux/arm64/v8"): an image
// manifest for one platform, an index of one image each for several. It
// returns the manifest's (or index's) digest.
func (r *Registry) PushImage(repo, tag string, platforms ...string) (string, error) {
	ref, err := name.ParseReference(r.Host + "/" + repo + ":" + tag)
	if err != nil {
		return "", err
	}
	opts := r.remoteOptions()
	if len(platforms) == 1 {
		img, err := image(platforms[0])
		if err != nil {
			return "", err
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return "", err
		}
		d, err := img.Digest()
		return d.String(), err
	}
	idx := v1.ImageIndex(empty.Index)
	for _, p := range platforms {
		img, err := image(p)
		if err != nil {
			return "", err
		}
		pl, err := v1.ParsePlatform(p)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: pl}})
	}
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return "", err
	}
	d, err := idx.Digest()
	return d.String(), err
}

// image is a random image of platform p.
func image(p string) (v1.Image, error) {
	pl, err := v1.ParsePlatform(p)
	if err != nil {
		return nil, err
	}
	img, err := random.Image(256, 1)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = pl.OS, pl.Architecture, pl.Variant
	return mutate.ConfigFile(img, cfg)
}

// remoteOptions reach the registry: its CA trusted, as its first user.
func (r *Registry) remoteOptions() []remote.Option {
	pool := x509.NewCertPool()
	pool.AddCert(r.srv.Certificate())
	t := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	opts := []remote.Option{remote.WithTransport(t)}
	for user, password := range r.users {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: user, Password: password}))
		break
	}
	return opts
}

// Mirror starts a registry on loopback holding each image of images
// ("repo:tag", linux/amd64 and linux/arm64) and writes into dir a
// registries.yaml that mirrors registry to it, trusting its CA, as a
// node's would; it prints the file, and returns its path and how to stop
// the registry. The demos pull their charts' images through it.
func Mirror(ctx context.Context, dir, registry string, images ...string) (string, func(), error) {
	reg, err := Start(ctx, dir)
	if err != nil {
		return "", nil, err
	}
	for _, img := range images {
		repo, tag, _ := strings.Cut(img, ":")
		if _, err := reg.PushImage(repo, tag, "linux/amd64", "linux/arm64"); err != nil {
			reg.Close()
			return "", nil, fmt.Errorf("pushing %s: %w", img, err)
		}
	}
	text := fmt.Sprintf("mirrors:\n  %s:\n    endpoint: [\"https://%s\"]\nconfigs:\n  %q:\n    tls:\n      ca_file: %s\n",
		registry, reg.Host, reg.Host, reg.CAFile)
	path := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		reg.Close()
		return "", nil, err
	}
	fmt.Printf("   %s\n", strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n   "))
	return path, reg.Close, nil
}
