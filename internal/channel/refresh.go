package channel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
)

// refreshTimeout bounds one read of the index.
const refreshTimeout = 30 * time.Second

// retryAfterFailure is the longest wait before a failed load is tried again.
const retryAfterFailure = 10 * time.Second

// snapshot is what one good read of the index says. It is never modified
// once published.
type snapshot struct {
	loaded   time.Time
	versions []string          // every version of the chart, highest first
	current  map[string]string // channel name → version
	problems map[string]string // channel name → why it has no version
}

func (sn *snapshot) has(version string) bool {
	for _, v := range sn.versions {
		if v == version {
			return true
		}
	}
	return false
}

// run loads the index until ctx ends.
func (s *Server) run(ctx context.Context) {
	defer close(s.stopped)
	for first := true; ; first = false {
		err := s.refresh(ctx)
		wait := s.cfg.TTL * 3 / 4
		if err != nil {
			msg := oneLine(err.Error())
			s.lastErr.Store(&msg)
			wait = min(wait, retryAfterFailure)
			if ctx.Err() == nil {
				s.log.Warn("reading the chart index failed; serving the last good one", "source", s.cfg.Source, "chart", s.cfg.Chart, "loaded", s.snap.Load() != nil, "retry-in", wait, "error", err)
			}
		}
		if first {
			close(s.loaded)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// refresh reads the index once and publishes what it says. On error the
// current snapshot stays.
func (s *Server) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	// A new Source each time: a Source reads its index once.
	src, err := chart.NewSource(s.cfg.Source, s.srcOpts)
	if err != nil {
		return err
	}
	versions, err := src.Versions(ctx, s.cfg.Chart)
	if err != nil {
		return err
	}
	next := &snapshot{loaded: time.Now(), versions: versions, current: map[string]string{}, problems: map[string]string{}}
	for _, ch := range s.cfg.Channels {
		v, err := chart.Latest(ctx, src, s.cfg.Chart, ch.Constraint, ch.Devel)
		if err != nil {
			next.problems[ch.Name] = oneLine(err.Error())
			continue
		}
		next.current[ch.Name] = v
	}
	prev := s.snap.Swap(next)
	s.lastErr.Store(nil)
	s.logChanges(prev, next)
	return nil
}

// logChanges logs each channel whose version changed.
func (s *Server) logChanges(prev, next *snapshot) {
	for _, ch := range s.cfg.Channels {
		was, now := "", next.current[ch.Name]
		if prev != nil {
			was = prev.current[ch.Name]
		}
		switch {
		case now == was:
		case now == "":
			s.log.Warn("channel has no version", "channel", ch.Name, "previous", was, "reason", next.problems[ch.Name])
		default:
			s.log.Info("channel version", "channel", ch.Name, "version", now, "previous", was)
		}
	}
}

// oneLine joins the lines of msg, for one-line answers and logs.
func oneLine(msg string) string {
	return strings.Join(strings.Fields(msg), " ")
}

// lastError says why the last load failed, or "" after a good one.
func (s *Server) lastError() string {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// current returns the snapshot to answer from, waiting for the first load
// if there is none yet.
func (s *Server) current(ctx context.Context) (*snapshot, error) {
	if sn := s.snap.Load(); sn != nil {
		return sn, nil
	}
	if !s.started.Load() {
		return nil, fmt.Errorf("the index of chart %s in %s is not being read (server not started)", s.cfg.Chart, s.cfg.Source)
	}
	select {
	case <-s.loaded:
	case <-ctx.Done():
		return nil, fmt.Errorf("the index of chart %s in %s is not read yet", s.cfg.Chart, s.cfg.Source)
	}
	if sn := s.snap.Load(); sn != nil {
		return sn, nil
	}
	return nil, fmt.Errorf("the index of chart %s in %s could not be read: %s", s.cfg.Chart, s.cfg.Source, s.lastError())
}
