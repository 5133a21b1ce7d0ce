// Command channelbench is a bounded load run against `chart-upgrader
// channel serve`: the server on loopback reading the bundled example charts,
// C concurrent clients asking GET /v1/channels/stable for D seconds (as SUC
// does, without following the redirect), then requests per second and the
// latency percentiles. scripts/bench-channel runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/channel"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long to load the server")
	clients := flag.Int("clients", 32, "concurrent clients (keep-alive connections)")
	flag.Parse()
	if err := run(*duration, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "channelbench:", err)
		os.Exit(1)
	}
}

func run(duration time.Duration, clients int) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	srv, err := channel.NewServer(channel.Config{
		Source: filepath.Join(root, "package", "examples", "charts"), Chart: "demo-app", TTL: time.Minute,
		Channels: []channel.Channel{{Name: "stable", Constraint: ">=1.0.0 <3.0.0"}, {Name: "latest", Constraint: "*"}},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.ServeListener(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/v1/channels/stable"

	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") == "" {
			return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return time.Since(start), nil
	}
	// the first request loads the index; wait for it, outside the measure
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := get(); err == nil {
			break
		} else if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}

	var mu sync.Mutex
	var all []time.Duration
	var failures int
	var wg sync.WaitGroup
	stop := time.Now().Add(duration)
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(stop) {
				d, err := get()
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, d)
			}
			mu.Lock()
			all = append(all, mine...)
			failures += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		return err
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[int(float64(len(all)-1)*p)]
	}
	fmt.Printf("channel serve on loopback, %d clients, %s, GOMAXPROCS=%d (load generator in the same process)\n\n",
		clients, duration, runtime.GOMAXPROCS(0))
	fmt.Println("| requests | failures | requests/s | p50 | p90 | p99 | max |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	fmt.Printf("| %d | %d | %.0f | %s | %s | %s | %s |\n", len(all), failures, float64(len(all))/elapsed.Seconds(),
		round(pct(0.50)), round(pct(0.90)), round(pct(0.99)), round(pct(1)))
	if failures > 0 {
		return fmt.Errorf("%d requests failed", failures)
	}
	return nil
}

func round(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
