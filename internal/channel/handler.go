package channel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The paths a Server answers.
const (
	pathHealth   = "/healthz"
	pathChannels = "/v1/channels"
	pathReleases = "/v1/releases"
)

// ServeHTTP answers GET and HEAD (any other method is 405):
//
//   - /v1/channels/NAME: 302 to <baseURL>/<version>, or without baseURL to
//     <scheme>://<Host of the request>/v1/releases/<version>, where version
//     is the highest version of the chart satisfying the channel's
//     constraint. An unknown channel is 404; no satisfying version, or no
//     index read yet, is 503 with the reason (SUC tries again later).
//   - /v1/channels: a JSON list of the channels, each with its name,
//     constraint, devel, and its version or the reason it has none.
//   - /v1/releases/VERSION: 200 with the version when the chart has it, so
//     the URL also works as a channel pinned to that version; else 404.
//   - /healthz: 200 "ok" once the index has been read, 503 before.
//
// Answers carry Cache-Control: no-store. Channel answers wait for the first
// read of the index, never for a refresh.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		reply(w, http.StatusMethodNotAllowed, "method %s not allowed (want GET or HEAD)", r.Method)
		return
	}
	p := r.URL.Path
	switch {
	case p == pathHealth:
		s.health(w)
	case p == pathChannels || p == pathChannels+"/":
		s.list(w, r)
	case strings.HasPrefix(p, pathChannels+"/"):
		s.channel(w, r, strings.TrimPrefix(p, pathChannels+"/"))
	case strings.HasPrefix(p, pathReleases+"/"):
		s.release(w, r, strings.TrimPrefix(p, pathReleases+"/"))
	default:
		reply(w, http.StatusNotFound, "not found: %s (see %s/NAME)", p, pathChannels)
	}
}

func (s *Server) health(w http.ResponseWriter) {
	if s.snap.Load() == nil {
		why := ""
		if e := s.lastError(); e != "" {
			why = ": " + e
		}
		reply(w, http.StatusServiceUnavailable, "the index of chart %s in %s is not read yet%s", s.cfg.Chart, s.cfg.Source, why)
		return
	}
	reply(w, http.StatusOK, "ok")
}

func (s *Server) channel(w http.ResponseWriter, r *http.Request, name string) {
	ch, ok := s.channels[name]
	if !ok {
		reply(w, http.StatusNotFound, "unknown channel %q; channels: %s", name, strings.Join(s.names(), ", "))
		return
	}
	sn, err := s.current(r.Context())
	if err != nil {
		reply(w, http.StatusServiceUnavailable, "channel %s: %v", ch.Name, err)
		return
	}
	version, ok := sn.current[ch.Name]
	if !ok {
		reply(w, http.StatusServiceUnavailable, "channel %s: %s", ch.Name, sn.problems[ch.Name])
		return
	}
	loc := s.location(r, version)
	w.Header().Set("Location", loc)
	reply(w, http.StatusFound, "%s", loc)
}

// location is where a channel answer sends SUC: the version is its last
// path element.
func (s *Server) location(r *http.Request, version string) string {
	base := s.cfg.BaseURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = pathReleases
		if r.Host != "" {
			base = scheme + "://" + r.Host + pathReleases
		}
	}
	return base + "/" + url.PathEscape(version)
}

// channelStatus is one item of the /v1/channels list.
type channelStatus struct {
	Channel
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	sn, err := s.current(r.Context())
	if err != nil {
		reply(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	out := make([]channelStatus, 0, len(s.cfg.Channels))
	for _, ch := range s.cfg.Channels {
		out = append(out, channelStatus{Channel: ch, Version: sn.current[ch.Name], Error: sn.problems[ch.Name]})
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

func (s *Server) release(w http.ResponseWriter, r *http.Request, version string) {
	sn, err := s.current(r.Context())
	if err != nil {
		reply(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	if !sn.has(version) {
		reply(w, http.StatusNotFound, "chart %s has no version %q in %s", s.cfg.Chart, version, s.cfg.Source)
		return
	}
	reply(w, http.StatusOK, "%s", version)
}

// names lists the channels, sorted.
func (s *Server) names() []string {
	names := make([]string, 0, len(s.cfg.Channels))
	for _, ch := range s.cfg.Channels {
		names = append(names, ch.Name)
	}
	return names
}

// reply writes a one-line text answer.
func reply(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, oneLine(fmt.Sprintf(format, args...)))
}
