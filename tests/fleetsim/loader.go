package fleetsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// DirLoader loads charts from dir, which holds chart archives (*.tgz) and
// unpacked chart directories, any number of versions of each chart. Every
// call reads the disk again, so charts added later are found.
func DirLoader(dir string) ChartLoader {
	return func(_ context.Context, name, version string) (*chart.Chart, error) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("listing charts in %s: %w", dir, err)
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			switch {
			case e.IsDir():
				if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); err != nil {
					continue
				}
			case !strings.HasSuffix(e.Name(), ".tgz"):
				continue
			}
			ch, err := loader.Load(path)
			if err != nil {
				return nil, fmt.Errorf("loading chart %s: %w", path, err)
			}
			if ch.Metadata.Name == name && ch.Metadata.Version == version {
				return ch, nil
			}
		}
		return nil, fmt.Errorf("chart %s version %s not found in %s", name, version, dir)
	}
}
