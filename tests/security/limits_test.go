package security

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
)

// maxChannelBody is how much of a channel answer's body chart-upgrader
// reads (internal/channel maxDrain), as docs/reference.md states it.
const maxChannelBody = 64 << 10

// endless streams prefix and then filler forever, without a
// Content-Length, until the client hangs up; sent counts what went out.
func endless(prefix string, sent *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("# filler, beyond any limit ...................................\n"), 1024)
		n, err := rw.Write([]byte(prefix))
		sent.Add(int64(n))
		for err == nil {
			n, err = rw.Write(chunk)
			sent.Add(int64(n))
		}
	})
}

// claims answers 200 with a Content-Length of n, sending a few bytes only.
func claims(n int64) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte("apiVersion: v1\n"))
	})
}

// Every download is bounded: an index, an archive, a channel answer that
// never ends (or claims to be larger than the limit) is refused after at
// most the limit, as bad input naming the URL and the limit — or, for a
// channel answer, whose body carries nothing, read up to its limit and
// ignored.
func TestDownloadLimits(t *testing.T) {
	w := newWorld(t)
	name := w.install(example.UserValues())
	ref := "managedchart/" + w.ns + "/" + name
	// what the client may have taken in over the limit: socket buffers
	const slack = 32 << 20

	t.Run("index, streamed", func(t *testing.T) {
		var sent atomic.Int64
		srv := httptest.NewServer(endless("apiVersion: v1\nentries: {}\n", &sent))
		defer srv.Close()
		r := w.cli(false, "resolve", "--repo", srv.URL, "--chart", "demo-app")
		assert.Equal(t, 2, r.code, r.stderr)
		assert.Contains(t, r.stderr, srv.URL+"/index.yaml: the response is larger than the limit of 32 MiB")
		srv.Close() // waits for the handler
		assert.Less(t, sent.Load(), chart.DefaultMaxIndexBytes+slack, "the client read on")
	})
	t.Run("index, by Content-Length", func(t *testing.T) {
		srv := httptest.NewServer(claims(chart.DefaultMaxIndexBytes + 1))
		defer srv.Close()
		r := w.cli(true, "preflight", "--target", ref, "--chart-source", srv.URL, "--version", "2.0.0")
		assert.Equal(t, 2, r.code, r.stderr)
		assert.Contains(t, r.stderr, srv.URL+"/index.yaml: the response is larger than the limit of 32 MiB")
	})
	t.Run("archive, streamed", func(t *testing.T) {
		var sent atomic.Int64
		srv := httptest.NewServer(w.repo(nil, endless("\x1f\x8b", &sent)))
		defer srv.Close()
		r := w.cli(true, "preflight", "--target", ref, "--chart-source", srv.URL, "--version", "2.0.0")
		assert.Equal(t, 2, r.code, r.stderr)
		assert.Contains(t, r.stderr, srv.URL+"/charts/demo-app-2.0.0.tgz: the response is larger than the limit of 64 MiB")
		srv.Close()
		assert.Less(t, sent.Load(), chart.MaxArchiveBytes+slack, "the client read on")
	})
	t.Run("archive, decompressed", func(t *testing.T) {
		srv := httptest.NewServer(w.repo(nil, blob(zeroBomb(t))))
		defer srv.Close()
		r := w.cli(true, "preflight", "--target", ref, "--chart-source", srv.URL, "--version", "2.0.0")
		assert.Equal(t, 2, r.code, r.stderr)
		assert.Contains(t, r.stderr, "loading chart "+srv.URL+"/charts/demo-app-2.0.0.tgz: decompressed chart is larger than the limit of 256 MiB")
	})
	t.Run("channel answer body", func(t *testing.T) {
		for _, code := range []int{http.StatusOK, http.StatusFound} {
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if code == http.StatusFound {
					rw.Header().Set("Location", "/releases/v9.8.7")
				}
				rw.WriteHeader(code)
				endless("", &sent).ServeHTTP(rw, r)
			}))
			r := w.cli(false, "resolve", "--channel", srv.URL+"/v1/channels/v9.8.7")
			srv.Close()
			require.Equal(t, 0, r.code, "HTTP %d: %s", code, r.stderr)
			assert.Equal(t, "v9.8.7\n", r.stdout)
			assert.Less(t, sent.Load(), int64(maxChannelBody+slack), "the client read on")
		}
	})
	t.Run("channel server upstream index", func(t *testing.T) {
		var sent atomic.Int64
		srv := httptest.NewServer(endless("apiVersion: v1\nentries: {}\n", &sent))
		defer srv.Close()
		code, body, _ := channelAnswer(t, "source: "+srv.URL+"\nchart: demo-app\nchannels: {stable: '*'}\n", "/v1/channels/stable")
		assert.Equal(t, http.StatusServiceUnavailable, code, body)
		assert.Contains(t, body, "larger than the limit of 32 MiB")
	})
}

// zeroBomb is a chart archive of the example chart's Chart.yaml then files
// of 8 MiB of zeros each, honest about their size, more than MaxChartBytes
// in all: a third of a MiB compressed, a decompression bomb.
func zeroBomb(t *testing.T) []byte {
	t.Helper()
	chartfile, err := os.ReadFile(filepath.Join("..", "..", "package", "examples", "charts", "demo-app-2.0.0", "Chart.yaml"))
	require.NoError(t, err)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	require.NoError(t, err)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "demo-app/Chart.yaml", Mode: 0o644, Size: int64(len(chartfile))}))
	_, err = tw.Write(chartfile)
	require.NoError(t, err)
	zeros := make([]byte, 8<<20)
	for i := 0; int64(i*len(zeros)) <= chart.MaxChartBytes; i++ {
		hd := &tar.Header{Name: fmt.Sprintf("demo-app/templates/zeros-%d.yaml", i), Mode: 0o644, Size: int64(len(zeros))}
		require.NoError(t, tw.WriteHeader(hd))
		_, err := tw.Write(zeros)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	require.Less(t, int64(buf.Len()), chart.MaxArchiveBytes)
	return buf.Bytes()
}

// The limits are documented where an operator reads about the commands.
func TestLimitsDocumented(t *testing.T) {
	reference, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference.md"))
	require.NoError(t, err)
	doc := string(reference)
	i := strings.Index(doc, "## Size limits")
	require.GreaterOrEqual(t, i, 0, "docs/reference.md has no Size limits section")
	section := doc[i:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	mib := func(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
	for what, limit := range map[string]string{
		"`index.yaml`":   mib(chart.DefaultMaxIndexBytes),
		"compressed:":    mib(chart.MaxArchiveBytes),
		"decompressed":   mib(chart.MaxChartBytes),
		"channel answer": fmt.Sprintf("%d KiB", maxChannelBody>>10),
	} {
		var line string
		for _, l := range strings.Split(section, "\n") {
			if strings.Contains(l, what) {
				line = l
				break
			}
		}
		require.NotEmpty(t, line, "the Size limits section says nothing of %s", what)
		assert.Contains(t, line, limit, "docs/reference.md states the %s limit", what)
	}
}
