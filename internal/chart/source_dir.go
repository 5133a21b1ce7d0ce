package chart

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// dirSource is a local directory of chart directories and .tgz archives, or
// a single chart directory or archive.
type dirSource struct {
	root string
	lim  limits

	mu    sync.Mutex
	index *dirIndex // nil until read
}

// dirIndex is what the directory holds, read once.
type dirIndex struct {
	charts     map[string][]dirEntry // by chart name
	unreadable []string              // entries that look like charts but did not read
}

type dirEntry struct {
	version string
	path    string
}

func (s *dirSource) String() string { return s.root }

func (s *dirSource) Versions(ctx context.Context, name string) ([]string, error) {
	idx, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	entries, ok := idx.charts[name]
	if !ok {
		return nil, s.noName(idx, name)
	}
	versions := make([]string, 0, len(entries))
	for _, e := range entries {
		versions = append(versions, e.version)
	}
	return sortVersions(versions), nil
}

func (s *dirSource) Load(ctx context.Context, name, version string) (*chart.Chart, error) {
	idx, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	entries, ok := idx.charts[name]
	if !ok {
		return nil, s.noName(idx, name)
	}
	var found []dirEntry
	for _, e := range entries {
		if sameVersion(version, e.version) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		versions, _ := s.Versions(ctx, name)
		err := notFoundVersion(s, name, version, versions)
		if len(idx.unreadable) > 0 {
			err = fmt.Errorf("%w (unreadable: %s)", err, list(idx.unreadable))
		}
		return nil, err
	case 1:
	default:
		return nil, outcome.BadInput(fmt.Errorf("chart %s version %q is in %s more than once: %s and %s", name, version, s, found[0].path, found[1].path))
	}
	c, err := loadPath(found[0].path, s.lim)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("loading chart %q: %w", found[0].path, err))
	}
	if err := checkLoaded(c, found[0].path, name, version); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *dirSource) noName(idx *dirIndex, name string) error {
	names := make([]string, 0, len(idx.charts))
	for n := range idx.charts {
		names = append(names, n)
	}
	err := notFoundName(s, name, names)
	if len(idx.unreadable) > 0 {
		err = fmt.Errorf("%w (unreadable: %s)", err, list(idx.unreadable))
	}
	return err
}

// read indexes the directory on first use. A failed read is not kept, so a
// later call tries again.
func (s *dirSource) read(ctx context.Context) (*dirIndex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index != nil {
		return s.index, nil
	}
	idx, err := s.scan(ctx)
	if err != nil {
		return nil, err
	}
	s.index = idx
	return idx, nil
}

func (s *dirSource) scan(ctx context.Context) (*dirIndex, error) {
	idx := &dirIndex{charts: map[string][]dirEntry{}}
	var candidates []string
	fi, err := os.Stat(s.root)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("reading chart source: %w", err))
	}
	if !fi.IsDir() || isChartDir(s.root) {
		candidates = append(candidates, s.root)
	}
	if fi.IsDir() {
		des, err := os.ReadDir(s.root)
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("reading chart source: %w", err))
		}
		for _, de := range des {
			p := filepath.Join(s.root, de.Name())
			if strings.HasSuffix(de.Name(), ".tgz") || isChartDir(p) {
				candidates = append(candidates, p)
			}
		}
	}
	for _, p := range candidates {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		md, err := s.metadata(p)
		if err != nil {
			idx.unreadable = append(idx.unreadable, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		idx.charts[md.Name] = append(idx.charts[md.Name], dirEntry{version: md.Version, path: p})
	}
	return idx, nil
}

func isChartDir(p string) bool {
	fi, err := os.Stat(filepath.Join(p, "Chart.yaml"))
	return err == nil && fi.Mode().IsRegular()
}

// metadata reads the Chart.yaml of the chart directory or archive at p.
func (s *dirSource) metadata(p string) (*chart.Metadata, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	var data []byte
	if fi.IsDir() {
		data, err = os.ReadFile(filepath.Join(p, "Chart.yaml"))
	} else {
		data, err = s.archiveChartfile(p, fi.Size())
	}
	if err != nil {
		return nil, err
	}
	md := new(chart.Metadata)
	if err := yaml.Unmarshal(data, md); err != nil {
		return nil, fmt.Errorf("reading Chart.yaml: %w", err)
	}
	if md.APIVersion == "" {
		md.APIVersion = chart.APIVersionV1
	}
	if err := md.Validate(); err != nil {
		return nil, fmt.Errorf("reading Chart.yaml: %w", err)
	}
	return md, nil
}

// archiveChartfile returns the top Chart.yaml of the archive at p, reading
// no further than it.
func (s *dirSource) archiveChartfile(p string, size int64) ([]byte, error) {
	if size > s.lim.archive {
		return nil, fmt.Errorf("archive of %d bytes is larger than the limit of %s", size, formatBytes(s.lim.archive))
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("not a gzip-compressed chart archive: %w", err)
	}
	defer zr.Close()
	content := &capReader{r: zr, max: s.lim.content, what: "decompressed chart"}
	tr := tar.NewReader(content)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("no Chart.yaml in the archive")
		}
		if err != nil {
			return nil, corrupt(err)
		}
		name, err := entryName(hd)
		if err != nil {
			return nil, err
		}
		if name == "Chart.yaml" {
			return io.ReadAll(io.LimitReader(tr, maxChartfileBytes))
		}
	}
}

// maxChartfileBytes bounds the Chart.yaml read while indexing.
const maxChartfileBytes = 1 << 20
