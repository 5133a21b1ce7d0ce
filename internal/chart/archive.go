package chart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// Size limits of one chart archive.
const (
	// MaxArchiveBytes bounds the compressed size of a chart archive (64 MiB).
	MaxArchiveBytes int64 = 64 << 20
	// MaxChartBytes bounds the decompressed size of a chart archive, all
	// entries and nested subchart archives together (256 MiB).
	MaxChartBytes int64 = 256 << 20
)

var (
	errTooLarge = errors.New("too large")
	errUnsafe   = errors.New("unsafe archive entry")

	utf8BOM       = []byte{0xEF, 0xBB, 0xBF}
	drivePath     = regexp.MustCompile(`^[a-zA-Z]:`)
	nestedArchive = regexp.MustCompile(`^(charts/[^/]+/)*charts/[^/_.][^/]*\.tgz$`)
)

// limits bounds what reading one chart archive may cost.
type limits struct {
	archive int64 // compressed bytes of one archive
	content int64 // decompressed bytes, nested archives included
}

func defaultLimits() limits { return limits{archive: MaxArchiveBytes, content: MaxChartBytes} }

// archiveReader reads chart archives into memory, entry by entry, refusing
// anything a chart has no business holding: paths that are absolute or climb
// out with "..", links and special files, and more data than its limits.
type archiveReader struct {
	lim  limits
	used int64 // decompressed bytes read so far, nested archives included
}

// read returns the files of the archive in r, named relative to the chart
// directory at the top of the archive (as Helm's loader names them). Every
// subchart archive under charts/ is read too, so the same rules hold for it.
func (a *archiveReader) read(r io.Reader) ([]*archive.BufferedFile, error) {
	files, err := a.readOne(r)
	if err != nil {
		return nil, err
	}
	if err := a.checkNested(files); err != nil {
		return nil, err
	}
	return files, nil
}

// checkNested reads every subchart archive among files with the same rules.
func (a *archiveReader) checkNested(files []*archive.BufferedFile) error {
	for _, f := range files {
		if !nestedArchive.MatchString(f.Name) {
			continue
		}
		if _, err := a.read(bytes.NewReader(f.Data)); err != nil {
			return fmt.Errorf("subchart archive %q: %w", f.Name, err)
		}
	}
	return nil
}

func (a *archiveReader) readOne(r io.Reader) ([]*archive.BufferedFile, error) {
	compressed := &capReader{r: r, max: a.lim.archive, what: "compressed archive"}
	zr, err := gzip.NewReader(compressed)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("not a gzip-compressed chart archive: %w", err)
	}
	defer zr.Close()
	content := &capReader{r: zr, max: a.lim.content - a.used, what: "decompressed chart"}
	defer func() { a.used += content.n }()

	var files []*archive.BufferedFile
	tr := tar.NewReader(content)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, corrupt(err)
		}
		name, err := entryName(hd)
		if err != nil {
			return nil, err
		}
		if name == "" { // a directory or a global header
			continue
		}
		if hd.Size > content.left() {
			return nil, content.tooLarge()
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, corrupt(err)
		}
		files = append(files, &archive.BufferedFile{Name: name, Data: bytes.TrimPrefix(data, utf8BOM)})
	}
	// Read to the end of the gzip stream, so a corrupt tail fails its checksum.
	if _, err := io.Copy(io.Discard, content); err != nil {
		return nil, corrupt(err)
	}
	if len(files) == 0 {
		return nil, errors.New("the archive holds no files")
	}
	return files, nil
}

// entryName checks one tar entry and returns its path inside the chart
// directory, or "" for an entry to skip.
func entryName(hd *tar.Header) (string, error) {
	raw := hd.Name
	name := strings.ReplaceAll(raw, `\`, "/") // archives made on Windows
	if path.IsAbs(name) || drivePath.MatchString(name) {
		return "", fmt.Errorf("%w: %q has an absolute path", errUnsafe, raw)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q refers to a parent directory (..)", errUnsafe, raw)
		}
	}
	switch hd.Typeflag {
	case tar.TypeReg:
	case tar.TypeDir, tar.TypeXGlobalHeader:
		return "", nil
	case tar.TypeSymlink:
		return "", fmt.Errorf("%w: %q is a symbolic link to %q", errUnsafe, raw, hd.Linkname)
	case tar.TypeLink:
		return "", fmt.Errorf("%w: %q is a hard link to %q", errUnsafe, raw, hd.Linkname)
	default:
		return "", fmt.Errorf("%w: %q is not a regular file (tar type %q)", errUnsafe, raw, hd.Typeflag)
	}
	top, rest, _ := strings.Cut(name, "/")
	rest = path.Clean(rest)
	if top == "" || rest == "." || rest == "" {
		return "", fmt.Errorf("%w: %q is not inside the chart directory of the archive", errUnsafe, raw)
	}
	return rest, nil
}

func corrupt(err error) error {
	if errors.Is(err, errTooLarge) {
		return err
	}
	return fmt.Errorf("corrupt chart archive: %w", err)
}

// capReader fails with errTooLarge once more than max bytes came through.
type capReader struct {
	r    io.Reader
	max  int64
	n    int64
	what string
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		return 0, c.tooLarge()
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, c.tooLarge()
	}
	return n, err
}

func (c *capReader) left() int64 { return c.max - c.n }

func (c *capReader) tooLarge() error {
	return fmt.Errorf("%s is larger than the limit of %s: %w", c.what, formatBytes(c.max), errTooLarge)
}

// formatBytes writes a size limit for people: "64 MiB", "1500 bytes".
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// Archive packages a loaded chart as a .tgz, as `helm package` does
// (chartutil.Save), for a target that carries the chart itself.
func Archive(c *chart.Chart) ([]byte, error) {
	dir, err := os.MkdirTemp("", "chart-upgrader-archive-")
	if err != nil {
		return nil, fmt.Errorf("packaging chart %s: %w", c.Name(), err)
	}
	defer os.RemoveAll(dir)
	file, err := chartutil.Save(c, dir)
	if err != nil {
		return nil, fmt.Errorf("packaging chart %s %s: %w", c.Name(), c.Metadata.Version, err)
	}
	return os.ReadFile(file)
}
