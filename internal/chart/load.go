package chart

import (
	"errors"
	"fmt"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Load reads the chart at path: a chart directory or a .tgz archive.
//
// An archive larger than MaxArchiveBytes, or holding more than MaxChartBytes
// of files, or holding an absolute path, a ".." path, a link or a special
// file, is refused; so is a subchart archive inside it that breaks the same
// rules. Every error is marked outcome.BadInput and names path.
func Load(path string) (*chart.Chart, error) {
	c, err := loadPath(path, defaultLimits())
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("loading chart %q: %w", path, err))
	}
	return c, nil
}

func loadPath(path string, lim limits) (*chart.Chart, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return loadDir(path, lim)
	}
	return loadFile(path, lim)
}

func loadDir(dir string, lim limits) (*chart.Chart, error) {
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("not a chart directory: no Chart.yaml")
	}
	c, err := loader.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	// Helm reads the subchart archives of a directory itself; hold them to
	// the rules of our archives too.
	a := &archiveReader{lim: lim}
	files := make([]*archive.BufferedFile, 0, len(c.Raw))
	for _, f := range c.Raw {
		files = append(files, &archive.BufferedFile{Name: f.Name, Data: f.Data})
	}
	if err := a.checkNested(files); err != nil {
		return nil, err
	}
	return c, nil
}

func loadFile(path string, lim limits) (*chart.Chart, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a chart directory or archive file")
	}
	if fi.Size() > lim.archive {
		return nil, fmt.Errorf("archive of %d bytes is larger than the limit of %s: %w", fi.Size(), formatBytes(lim.archive), errTooLarge)
	}
	return loadArchive(f, lim)
}

// loadArchive loads a chart from the archive in r.
func loadArchive(r io.Reader, lim limits) (*chart.Chart, error) {
	a := &archiveReader{lim: lim}
	files, err := a.read(r)
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(files)
}
