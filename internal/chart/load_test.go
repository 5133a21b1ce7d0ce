package chart

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func TestLoadDirectory(t *testing.T) {
	c, err := Load(appChart(t))
	require.NoError(t, err)
	assert.Equal(t, "app", c.Name())
	assert.Equal(t, "1.0.0", c.Metadata.Version)
	require.Len(t, c.Dependencies(), 1)
	sub := c.Dependencies()[0]
	assert.Equal(t, "sub", sub.Name())
	require.Len(t, sub.Dependencies(), 1)
	assert.Equal(t, "deeper", sub.Dependencies()[0].Name())
}

func TestLoadArchive(t *testing.T) {
	p := writeFile(t, "app-1.0.0.tgz", packDir(t, appChart(t), "app"))
	c, err := Load(p)
	require.NoError(t, err)
	assert.Equal(t, "app", c.Name())
	require.Len(t, c.Dependencies(), 1)
	assert.Len(t, c.Dependencies()[0].Dependencies(), 1)
	assert.NotEmpty(t, c.Schema)
}

func TestLoadArchiveWithSubchartArchive(t *testing.T) {
	sub := makeTgz(t,
		tarEntry{name: "sub/Chart.yaml", body: chartfile("sub", "0.1.0")},
		tarEntry{name: "sub/values.yaml", body: "color: red\n"},
	)
	p := writeFile(t, "top.tgz", makeTgz(t,
		tarEntry{name: "top/", typeflag: tar.TypeDir},
		tarEntry{name: "top/Chart.yaml", body: chartfile("top", "1.0.0")},
		tarEntry{name: "top/charts/sub-0.1.0.tgz", body: string(sub)},
	))
	c, err := Load(p)
	require.NoError(t, err)
	require.Len(t, c.Dependencies(), 1)
	assert.Equal(t, "sub", c.Dependencies()[0].Name())
}

func TestLoadBadInput(t *testing.T) {
	good := makeTgz(t, tarEntry{name: "app/Chart.yaml", body: chartfile("app", "1.0.0")})
	notChartDir := t.TempDir()
	writeFiles(t, notChartDir, map[string]string{"values.yaml": "a: 1\n"})
	badSub := makeTgz(t,
		tarEntry{name: "sub/Chart.yaml", body: chartfile("sub", "0.1.0")},
		tarEntry{name: "sub/templates/x.yaml", typeflag: tar.TypeSymlink, linkname: "/etc/passwd"},
	)
	dirWithBadSub := t.TempDir()
	writeFiles(t, dirWithBadSub, map[string]string{
		"Chart.yaml":           chartfile("top", "1.0.0"),
		"charts/sub-0.1.0.tgz": string(badSub),
	})

	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing path", filepath.Join(t.TempDir(), "nope"), "no such file or directory"},
		{"directory without Chart.yaml", notChartDir, "no Chart.yaml"},
		{"not gzip", writeFile(t, "values.tgz", []byte("a: 1\n")), "not a gzip-compressed chart archive"},
		{"truncated gzip", writeFile(t, "short.tgz", good[:len(good)/2]), "corrupt chart archive"},
		{"corrupt gzip tail", writeFile(t, "tail.tgz", corruptTail(good)), "corrupt chart archive"},
		{"parent directory entry", writeFile(t, "dotdot.tgz", makeTgz(t,
			tarEntry{name: "app/Chart.yaml", body: chartfile("app", "1.0.0")},
			tarEntry{name: "app/../../etc/cron.d/x", body: "x"},
		)), `"app/../../etc/cron.d/x" refers to a parent directory`},
		{"parent directory top", writeFile(t, "dotdot2.tgz", makeTgz(t,
			tarEntry{name: "../app/Chart.yaml", body: chartfile("app", "1.0.0")},
		)), "refers to a parent directory"},
		{"absolute path", writeFile(t, "abs.tgz", makeTgz(t,
			tarEntry{name: "/app/Chart.yaml", body: chartfile("app", "1.0.0")},
		)), `"/app/Chart.yaml" has an absolute path`},
		{"symlink", writeFile(t, "symlink.tgz", makeTgz(t,
			tarEntry{name: "app/Chart.yaml", body: chartfile("app", "1.0.0")},
			tarEntry{name: "app/values.yaml", typeflag: tar.TypeSymlink, linkname: "/etc/shadow"},
		)), `"app/values.yaml" is a symbolic link to "/etc/shadow"`},
		{"hard link", writeFile(t, "hardlink.tgz", makeTgz(t,
			tarEntry{name: "app/Chart.yaml", body: chartfile("app", "1.0.0")},
			tarEntry{name: "app/values.yaml", typeflag: tar.TypeLink, linkname: "app/Chart.yaml"},
		)), "is a hard link"},
		{"device", writeFile(t, "dev.tgz", makeTgz(t,
			tarEntry{name: "app/Chart.yaml", body: chartfile("app", "1.0.0")},
			tarEntry{name: "app/null", typeflag: tar.TypeChar},
		)), "is not a regular file"},
		{"Chart.yaml at the top", writeFile(t, "flat.tgz", makeTgz(t,
			tarEntry{name: "Chart.yaml", body: chartfile("app", "1.0.0")},
		)), "not inside the chart directory"},
		{"empty archive", writeFile(t, "empty.tgz", makeTgz(t)), "holds no files"},
		{"no Chart.yaml", writeFile(t, "nochart.tgz", makeTgz(t,
			tarEntry{name: "app/values.yaml", body: "a: 1\n"},
		)), "Chart.yaml file is missing"},
		{"symlink in subchart archive", writeFile(t, "nested.tgz", makeTgz(t,
			tarEntry{name: "top/Chart.yaml", body: chartfile("top", "1.0.0")},
			tarEntry{name: "top/charts/sub-0.1.0.tgz", body: string(badSub)},
		)), `subchart archive "charts/sub-0.1.0.tgz": unsafe archive entry: "sub/templates/x.yaml" is a symbolic link`},
		{"symlink in subchart archive of a directory", dirWithBadSub, "is a symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.path)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Equal(t, outcome.ExitBadInput, outcome.Code(err), "%v", err)
			assert.ErrorContains(t, err, tt.want)
			assert.ErrorContains(t, err, tt.path, "the error names the path")
		})
	}
}

// corruptTail flips a byte of the gzip trailer (the CRC of the content).
func corruptTail(tgz []byte) []byte {
	out := bytes.Clone(tgz)
	out[len(out)-6] ^= 0xff
	return out
}

func TestLoadSizeLimits(t *testing.T) {
	t.Run("compressed, default limit", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "huge.tgz")
		f, err := os.Create(p)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(MaxArchiveBytes+1)) // sparse: costs nothing
		require.NoError(t, f.Close())
		_, err = Load(p)
		require.ErrorIs(t, err, outcome.ErrBadInput)
		assert.ErrorContains(t, err, "larger than the limit of 64 MiB")
		assert.ErrorContains(t, err, p)
	})

	big := strings.Repeat("0123456789abcdef", 4096) // 64 KiB, compresses well
	tgz := makeTgz(t,
		tarEntry{name: "app/Chart.yaml", body: chartfile("app", "1.0.0")},
		tarEntry{name: "app/files/big.txt", body: big},
		tarEntry{name: "app/files/big2.txt", body: big},
	)
	p := writeFile(t, "app.tgz", tgz)

	t.Run("compressed", func(t *testing.T) {
		_, err := loadPath(p, limits{archive: int64(len(tgz)) - 1, content: MaxChartBytes})
		require.ErrorIs(t, err, errTooLarge)
		assert.ErrorContains(t, err, "larger than the limit")
		// The same limit while streaming, when the size is not known first.
		_, err = loadArchive(bytes.NewReader(tgz), limits{archive: int64(len(tgz)) - 1, content: MaxChartBytes})
		require.ErrorIs(t, err, errTooLarge)
		assert.ErrorContains(t, err, "compressed archive is larger than the limit")
	})
	t.Run("decompressed", func(t *testing.T) {
		_, err := loadPath(p, limits{archive: MaxArchiveBytes, content: 100 << 10})
		require.ErrorIs(t, err, errTooLarge)
		assert.ErrorContains(t, err, "decompressed chart is larger than the limit of 100 KiB")
	})
	t.Run("decompressed, nested archives count", func(t *testing.T) {
		sub := makeTgz(t,
			tarEntry{name: "sub/Chart.yaml", body: chartfile("sub", "0.1.0")},
			tarEntry{name: "sub/files/big.txt", body: big},
		)
		nested := makeTgz(t,
			tarEntry{name: "top/Chart.yaml", body: chartfile("top", "1.0.0")},
			tarEntry{name: "top/files/big.txt", body: big},
			tarEntry{name: "top/charts/sub-0.1.0.tgz", body: string(sub)},
		)
		_, err := loadArchive(bytes.NewReader(nested), limits{archive: MaxArchiveBytes, content: 100 << 10})
		require.ErrorIs(t, err, errTooLarge)
		assert.ErrorContains(t, err, `subchart archive "charts/sub-0.1.0.tgz"`)
		_, err = loadArchive(bytes.NewReader(nested), limits{archive: MaxArchiveBytes, content: 200 << 10})
		require.NoError(t, err)
	})
	t.Run("within limits", func(t *testing.T) {
		c, err := loadPath(p, limits{archive: int64(len(tgz)), content: 200 << 10})
		require.NoError(t, err)
		assert.Len(t, c.Files, 2)
	})
}
