package channel

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// testChannels are the channels of the test servers.
var testChannels = []Channel{
	{Name: "stable", Constraint: ">=1.4.0 <2.0.0"},
	{Name: "latest", Constraint: "*"},
	{Name: "devel", Constraint: "*", Devel: true},
	{Name: "future", Constraint: ">=9.0.0"},
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer runs a channel Server for the chart harvester of r, behind a
// loopback HTTP server; the refresher stops when the test ends.
func startServer(t testing.TB, r *repo, ttl time.Duration, edit func(*Config)) (*Server, *httptest.Server, *syncBuffer) {
	t.Helper()
	cfg := Config{Source: r.URL(), Chart: "harvester", TTL: ttl, Channels: testChannels}
	if edit != nil {
		edit(&cfg)
	}
	logs := &syncBuffer{}
	s, err := NewServer(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	t.Cleanup(func() {
		cancel()
		<-s.stopped
	})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts, logs
}

// noFollow is a client that reads redirects the way SUC does.
var noFollow = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       10 * time.Second,
}

// get requests url with method and returns the answer with its body read.
func get(t testing.TB, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	require.NoError(t, err)
	resp, err := noFollow.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestServerChannels(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	_, ts, _ := startServer(t, r, time.Minute, nil)

	for channel, want := range map[string]string{"stable": "1.4.2", "latest": "2.0.0", "devel": "2.1.0-beta.1"} {
		resp, body := get(t, http.MethodGet, ts.URL+"/v1/channels/"+channel)
		assert.Equal(t, http.StatusFound, resp.StatusCode, channel)
		assert.Equal(t, ts.URL+"/v1/releases/"+want, resp.Header.Get("Location"), channel)
		assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
		assert.Equal(t, ts.URL+"/v1/releases/"+want+"\n", body)

		// the SUC contract, end to end
		got, err := Resolve(t.Context(), ts.URL+"/v1/channels/"+channel, fast())
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}

	t.Run("HEAD", func(t *testing.T) {
		resp, body := get(t, http.MethodHead, ts.URL+"/v1/channels/stable")
		assert.Equal(t, http.StatusFound, resp.StatusCode)
		assert.Equal(t, ts.URL+"/v1/releases/1.4.2", resp.Header.Get("Location"))
		assert.Empty(t, body)
	})
	t.Run("unknown channel", func(t *testing.T) {
		resp, body := get(t, http.MethodGet, ts.URL+"/v1/channels/beta")
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, `unknown channel "beta"; channels: devel, future, latest, stable`+"\n", body)
		_, err := Resolve(t.Context(), ts.URL+"/v1/channels/beta", fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput)
	})
	t.Run("no version satisfies", func(t *testing.T) {
		resp, body := get(t, http.MethodGet, ts.URL+"/v1/channels/future")
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Contains(t, body, `channel future: no versions of chart harvester in `+r.URL()+` satisfy ">=9.0.0"; available: 2.1.0-beta.1, 2.0.0`)
		assert.Equal(t, 1, strings.Count(body, "\n"), "one line")
	})
	t.Run("list", func(t *testing.T) {
		resp, body := get(t, http.MethodGet, ts.URL+"/v1/channels")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var list []channelStatus
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		require.Len(t, list, 4)
		assert.Equal(t, channelStatus{Channel: Channel{Name: "devel", Constraint: "*", Devel: true}, Version: "2.1.0-beta.1"}, list[0])
		assert.Equal(t, "future", list[1].Name)
		assert.Empty(t, list[1].Version)
		assert.Contains(t, list[1].Error, "no versions of chart harvester")
		assert.Equal(t, channelStatus{Channel: Channel{Name: "stable", Constraint: ">=1.4.0 <2.0.0"}, Version: "1.4.2"}, list[3])
	})
	t.Run("releases", func(t *testing.T) {
		resp, body := get(t, http.MethodGet, ts.URL+"/v1/releases/1.4.2")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "1.4.2\n", body)
		got, err := Resolve(t.Context(), ts.URL+"/v1/releases/1.4.2", fast())
		require.NoError(t, err)
		assert.Equal(t, "1.4.2", got, "a release URL is a pinned channel")
		resp, _ = get(t, http.MethodGet, ts.URL+"/v1/releases/1.4.9")
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
	t.Run("other methods", func(t *testing.T) {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
			resp, body := get(t, m, ts.URL+"/v1/channels/stable")
			assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
			assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
			assert.Contains(t, body, "method "+m+" not allowed")
		}
	})
	t.Run("other paths", func(t *testing.T) {
		for _, p := range []string{"/", "/v1", "/v1/channels/stable/x", "/v2/channels/stable"} {
			resp, _ := get(t, http.MethodGet, ts.URL+p)
			assert.Equal(t, http.StatusNotFound, resp.StatusCode, p)
		}
	})
}

func TestServerBaseURL(t *testing.T) {
	r := newRepo(t, false, "harvester", "1.4.2+build.7")
	_, ts, _ := startServer(t, r, time.Minute, func(c *Config) { c.BaseURL = "https://charts.example.com/harvester/releases" })
	resp, _ := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, "https://charts.example.com/harvester/releases/1.4.2+build.7", resp.Header.Get("Location"))
	got, err := Resolve(t.Context(), ts.URL+"/v1/channels/stable", fast())
	require.NoError(t, err)
	assert.Equal(t, "1.4.2-build.7", got, "SUC turns + into -")
}

func TestServerHealthAndFirstLoad(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	release := r.hold()
	t.Cleanup(release)
	_, ts, _ := startServer(t, r, time.Minute, nil)

	resp, body := get(t, http.MethodGet, ts.URL+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "not read yet")

	// a channel request waits for the first load, and only for it
	answered := make(chan *http.Response, 1)
	go func() {
		resp, _ := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
		answered <- resp
	}()
	select {
	case <-answered:
		t.Fatal("answered before the index was read")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	select {
	case resp := <-answered:
		assert.Equal(t, http.StatusFound, resp.StatusCode)
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after the first load")
	}
	resp, body = get(t, http.MethodGet, ts.URL+"/healthz")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok\n", body)
}

func TestServerFirstLoadFails(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	r.fail(http.StatusInternalServerError)
	_, ts, _ := startServer(t, r, time.Minute, nil)
	resp, body := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "could not be read")
	assert.Contains(t, body, "500 Internal Server Error")
	resp, body = get(t, http.MethodGet, ts.URL+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "500 Internal Server Error")
}

func TestServerNotStarted(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	s, err := NewServer(Config{Source: r.URL(), Chart: "harvester", Channels: testChannels}, nil)
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, body := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "server not started")
}

func TestServerRefreshesInTheBackground(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	_, ts, logs := startServer(t, r, 50*time.Millisecond, nil)
	resp, _ := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	require.Equal(t, ts.URL+"/v1/releases/1.4.2", resp.Header.Get("Location"))

	// a new version, but the repository holds every answer: the background
	// refresh is stuck, and a channel request must still be answered (from
	// the last index) while it is; were it waiting on the refresh, it would
	// hang here until the test times out
	before := r.hits.Load()
	release := r.hold()
	defer release()
	r.set("harvester", append(harvesterVersions, "1.4.3")...)
	eventually(t, 10*time.Second, "no background refresh started", func() bool { return r.hits.Load() > before })
	resp, _ = get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	assert.Equal(t, ts.URL+"/v1/releases/1.4.2", resp.Header.Get("Location"), "answered from the last index during the refresh")
	release()
	eventually(t, 10*time.Second, "stable never moved to 1.4.3", func() bool {
		resp, _ := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
		return resp.Header.Get("Location") == ts.URL+"/v1/releases/1.4.3"
	})
	assert.Contains(t, logs.String(), "channel=stable version=1.4.3 previous=1.4.2")
}

func TestServerKeepsLastGoodIndex(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	_, ts, logs := startServer(t, r, 50*time.Millisecond, nil)
	resp, _ := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	require.Equal(t, http.StatusFound, resp.StatusCode)

	r.fail(http.StatusBadGateway)
	failedFrom := r.hits.Load()
	eventually(t, 10*time.Second, "no refresh after the repository failed", func() bool { return r.hits.Load() >= failedFrom+3 })
	resp, _ = get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, ts.URL+"/v1/releases/1.4.2", resp.Header.Get("Location"))
	resp, _ = get(t, http.MethodGet, ts.URL+"/healthz")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, logs.String(), "reading the chart index failed; serving the last good one")
	assert.Contains(t, logs.String(), "502 Bad Gateway")

	// the chart vanishing is a failed refresh too
	r.fail(0)
	r.only("other", "1.0.0")
	seen := r.hits.Load()
	eventually(t, 10*time.Second, "no refresh after the chart vanished", func() bool { return r.hits.Load() >= seen+3 })
	resp, _ = get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	assert.Equal(t, ts.URL+"/v1/releases/1.4.2", resp.Header.Get("Location"))
}

func TestServerDirectorySource(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"1.4.0", "1.4.1"} {
		writeFile(t, dir+"/harvester-"+v+"/Chart.yaml", "apiVersion: v2\nname: harvester\nversion: "+v+"\n")
	}
	cfg := Config{Source: dir, Chart: "harvester", TTL: 50 * time.Millisecond, Channels: testChannels}
	s, err := NewServer(cfg, nil)
	require.NoError(t, err)
	s.Start(t.Context())
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, _ := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
	assert.Equal(t, ts.URL+"/v1/releases/1.4.1", resp.Header.Get("Location"))

	writeFile(t, dir+"/harvester-1.4.2/Chart.yaml", "apiVersion: v2\nname: harvester\nversion: 1.4.2\n")
	eventually(t, 10*time.Second, "the new chart directory was never seen", func() bool {
		resp, _ := get(t, http.MethodGet, ts.URL+"/v1/channels/stable")
		return resp.Header.Get("Location") == ts.URL+"/v1/releases/1.4.2"
	})
}

func TestNewServerErrors(t *testing.T) {
	ok := Config{Source: t.TempDir(), Chart: "app", Channels: []Channel{{Name: "a", Constraint: "*"}}}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"missing directory", func(c *Config) { c.Source = c.Source + "/missing" }, "no such file"},
		{"unsupported scheme", func(c *Config) { c.Source = "s3://bucket/charts" }, "unsupported scheme"},
		{"unreadable CA file", func(c *Config) { c.Source, c.CAFile = "https://charts.example.com", "/nonexistent/ca.pem" }, "reading CA file"},
		{"no channels", func(c *Config) { c.Channels = nil }, "at least one channel"},
		{"no chart", func(c *Config) { c.Chart = "" }, "a chart and at least one channel"},
		{"bad name", func(c *Config) { c.Channels = []Channel{{Name: "../x", Constraint: "*"}} }, `channel name "../x"`},
		{"repeated", func(c *Config) { c.Channels = append(c.Channels, c.Channels[0]) }, `channel "a" given twice`},
		{"bad constraint", func(c *Config) { c.Channels = []Channel{{Name: "a", Constraint: ">=banana"}} }, `version constraint ">=banana"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			cfg.Channels = append([]Channel(nil), ok.Channels...)
			tt.edit(&cfg)
			_, err := NewServer(cfg, nil)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestServeShutsDownGracefully(t *testing.T) {
	r := newRepo(t, false, "harvester", harvesterVersions...)
	release := r.hold()
	t.Cleanup(release)
	s, err := NewServer(Config{Source: r.URL(), Chart: "harvester", TTL: time.Minute, Channels: testChannels}, nil)
	require.NoError(t, err)
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := &acceptCounter{Listener: plain}
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.ServeListener(ctx, ln) }()

	// a request in flight (waiting for the first load) when the stop comes:
	// the server accepted its connection, and the repository is being read
	// (the hit alone may be the server's own refresher)
	answered := make(chan *http.Response, 1)
	go func() {
		resp, _ := get(t, http.MethodGet, base+"/v1/channels/stable")
		answered <- resp
	}()
	eventually(t, 10*time.Second, "the request never reached the server", func() bool {
		return ln.accepted.Load() > 0 && r.hits.Load() > 0
	})
	cancel()
	select {
	case err := <-served:
		t.Fatalf("returned with a request in flight: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	select {
	case resp := <-answered:
		assert.Equal(t, http.StatusFound, resp.StatusCode, "the request in flight is answered")
	case <-time.After(10 * time.Second):
		t.Fatal("the request in flight was never answered")
	}
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener did not return after its context ended")
	}
	select {
	case <-s.stopped:
	default:
		t.Fatal("the refresher still runs")
	}
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	assert.Error(t, err, "no longer listening")
}

func TestServeListenError(t *testing.T) {
	s, err := NewServer(Config{Source: t.TempDir(), Chart: "app", Channels: testChannels}, nil)
	require.NoError(t, err)
	err = s.Serve(t.Context(), "256.0.0.1:bad")
	assert.ErrorContains(t, err, `listening on "256.0.0.1:bad"`)
}

// acceptCounter counts the connections a listener accepted.
type acceptCounter struct {
	net.Listener
	accepted atomic.Int64
}

func (l *acceptCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}
