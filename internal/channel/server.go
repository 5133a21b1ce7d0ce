package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/httpclient"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// ShutdownTimeout bounds how long Serve waits for requests in flight once
// its context ends.
const ShutdownTimeout = 10 * time.Second

// Server serves SUC channels from the versions of one chart in a Helm
// repository or a directory of charts. It is an http.Handler (see ServeHTTP
// for the routes); Start loads the index and keeps it fresh, Serve does that
// and listens. A Server is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	srcOpts  chart.SourceOptions
	channels map[string]Channel

	snap      atomic.Pointer[snapshot] // nil until the first good load
	lastErr   atomic.Pointer[string]   // why the last load failed; nil after a good one
	started   atomic.Bool
	startOnce sync.Once
	loaded    chan struct{} // closed when the first load has ended, well or not
	stopped   chan struct{} // closed when the refresher has stopped
}

// NewServer checks cfg and returns a Server for it, logging to log (nil
// discards). A config whose source cannot be used (a missing directory, an
// unsupported URL scheme, an unreadable CA file), without channels, with a
// channel name that is not one URL path element, repeated, or a constraint
// that does not parse is outcome.BadInput. Nothing is read from the source
// until Start.
func NewServer(cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.File == "" {
		cfg.File = "channel server configuration"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Chart == "" || len(cfg.Channels) == 0 {
		return nil, outcome.BadInput(fmt.Errorf("%s: a chart and at least one channel are required", cfg.File))
	}
	cfg.Channels = slices.Clone(cfg.Channels)
	slices.SortFunc(cfg.Channels, func(a, b Channel) int { return strings.Compare(a.Name, b.Name) })
	s := &Server{cfg: cfg, log: log, channels: map[string]Channel{}, loaded: make(chan struct{}), stopped: make(chan struct{})}
	for _, ch := range cfg.Channels {
		if !channelName.MatchString(ch.Name) {
			return nil, outcome.BadInput(fmt.Errorf("%s: channel name %q: want letters, digits, '.', '_' and '-', at most 63", cfg.File, ch.Name))
		}
		if _, dup := s.channels[ch.Name]; dup {
			return nil, outcome.BadInput(fmt.Errorf("%s: channel %q given twice", cfg.File, ch.Name))
		}
		if _, err := semver.NewConstraint(ch.Constraint); err != nil {
			return nil, outcome.BadInput(fmt.Errorf("%s: channel %q: version constraint %q: %w", cfg.File, ch.Name, ch.Constraint, err))
		}
		s.channels[ch.Name] = ch
	}
	if strings.Contains(cfg.Source, "://") {
		// One client across refreshes, so connections are reused; each
		// refresh is bounded by its context.
		client, err := httpclient.New(httpclient.Options{CAFile: cfg.CAFile})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.File, err)
		}
		s.srcOpts.HTTPClient = client
	}
	if _, err := chart.NewSource(cfg.Source, s.srcOpts); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return s, nil
}

// Start loads the index in the background, then refreshes it every three
// quarters of the TTL (sooner after a failure) until ctx ends. Only the
// first call does anything. Channel requests wait for the first load only;
// a failed refresh keeps the last good index and is logged.
func (s *Server) Start(ctx context.Context) { s.start(ctx) }

// start is Start, telling whether this call started the refresher.
func (s *Server) start(ctx context.Context) bool {
	started := false
	s.startOnce.Do(func() {
		started = true
		s.started.Store(true)
		go s.run(ctx)
	})
	return started
}

// Serve listens on addr and serves until ctx ends, then shuts down
// gracefully; see ServeListener.
func (s *Server) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %q: %w", addr, err)
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener starts the Server (unless it was started) and serves on ln
// until ctx ends. Then it stops accepting connections, waits up to
// ShutdownTimeout for requests in flight, which can still use the index, and
// stops the refresher it started. The end of ctx is a normal end: it returns
// nil.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	refreshCtx, stopRefresh := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRefresh()
	ours := s.start(refreshCtx)
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * refreshTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	s.log.Info("serving channels", "addr", ln.Addr().String(), "source", s.cfg.Source, "chart", s.cfg.Chart, "ttl", s.cfg.TTL)
	select {
	case err := <-served:
		return fmt.Errorf("serving channels on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(shutdownCtx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	stopRefresh()
	if ours {
		<-s.stopped
	}
	if err != nil {
		return fmt.Errorf("shutting down the channel server on %s: %w", ln.Addr(), err)
	}
	s.log.Info("channel server stopped", "addr", ln.Addr().String())
	return nil
}
