package imagecheck_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/chart-upgrader/chart-upgrader/internal/imagecheck"
	"github.com/chart-upgrader/chart-upgrader/internal/registries"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
)

// BenchmarkImageCheck asks, as one run of the check does (a new Puller:
// nothing cached, 16 at once), for 40 distinct images, each an index of
// linux/amd64 and linux/arm64, through a registries.yaml mirror to a
// registry on loopback (TLS of its own CA): the shape of Harvester's
// chart, a few dozen images. Not a test: figures for docs/performance.md.
func BenchmarkImageCheck(b *testing.B) {
	dir := b.TempDir()
	reg, err := ociregistry.Start(context.Background(), dir)
	require.NoError(b, err)
	defer reg.Close()
	var imgs []registries.Image
	for i := range 40 {
		repo := fmt.Sprintf("rancher/component-%d", i)
		_, err := reg.PushImage(repo, "v1.4.0", "linux/amd64", "linux/arm64")
		require.NoError(b, err)
		img, err := registries.ParseImage("registry.example.invalid/" + repo + ":v1.4.0")
		require.NoError(b, err)
		imgs = append(imgs, img)
	}
	path := filepath.Join(dir, "registries.yaml")
	require.NoError(b, os.WriteFile(path, []byte(fmt.Sprintf("mirrors:\n  registry.example.invalid:\n    endpoint: [\"https://%s\"]\n"+
		"configs:\n  %q:\n    tls:\n      ca_file: %s\n", reg.Host, reg.Host, reg.CAFile)), 0o600))
	regs, err := imagecheck.LoadRegistries(path, "")
	require.NoError(b, err)
	var requests int64
	for b.Loop() {
		p := imagecheck.NewPuller(regs, 0)
		var g errgroup.Group
		g.SetLimit(imagecheck.DefaultJobs)
		for _, img := range imgs {
			g.Go(func() error {
				if got := p.Pull(b.Context(), img, nil); got.Found == nil {
					return fmt.Errorf("%s not found: %v", img, got.Tried)
				}
				return nil
			})
		}
		require.NoError(b, g.Wait())
		requests += p.Requests()
		p.Close()
	}
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
}
