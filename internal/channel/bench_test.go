package channel

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkServer measures channel answers under parallel load, through a
// real loopback HTTP server, the index already read.
func BenchmarkServer(b *testing.B) {
	r := newRepo(b, false, "harvester", harvesterVersions...)
	_, ts, _ := startServer(b, r, time.Minute, nil)
	transport := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}
	defer transport.CloseIdleConnections()
	client := &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	url := ts.URL + "/v1/channels/stable"
	want := ts.URL + "/v1/releases/1.4.2"
	if resp, _ := get(b, http.MethodGet, url); resp.Header.Get("Location") != want {
		b.Fatalf("Location %q, want %q", resp.Header.Get("Location"), want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusFound {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
