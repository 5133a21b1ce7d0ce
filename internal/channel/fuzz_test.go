package channel

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// FuzzParseConfig checks that the channel server configuration parser never
// panics, that every error is bad input naming the file, and that an
// accepted configuration is one NewServer can check: a source, a chart, a
// positive ttl, at least one channel, each with a name that is one URL path
// element and a constraint that parses, sorted by name, and a baseURL that
// is an http(s) URL without a trailing '/'.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"source: https://charts.example.com\nchart: harvester\nttl: 60s\ncaFile: ca.pem\nchannels:\n  stable: \">=1.4.0 <2.0.0\"\n  latest: \"*\"\n  devel: {constraint: \"*\", devel: true}\nbaseURL: https://x.example.com/r/\n",
		"source: charts\nchart: c\nchannels: {a: '*'}\n",
		"source: x\nchart: c\nchannels: {a/b: '*'}\n",
		"source: x\nchart: c\nchannels: {a: {constraint: '>>1'}}\n",
		"source: x\nchart: c\nchannels: {a: {devel: yes}}\n",
		"source: x\nchart: c\nttl: -1s\nchannels: {a: '*'}\n",
		"source: x\nchart: c\nbaseURL: 'http://h/?q'\nchannels: {a: '*'}\n",
		"source: x\nsource: y\n",
		"<<: {source: x}\nchart: c\nchannels: {a: '*'}\n",
		"channels: [a]\n",
		"",
		"- a\n",
		"source: &s x\nchart: *s\nchannels: {? [a] : b}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("dir/fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, outcome.ErrBadInput) {
				t.Fatalf("error is not bad input: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "dir/fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if cfg.Source == "" || cfg.Chart == "" || cfg.TTL <= 0 || len(cfg.Channels) == 0 {
			t.Fatalf("incomplete configuration accepted: %+v", cfg)
		}
		for i, ch := range cfg.Channels {
			if !channelName.MatchString(ch.Name) {
				t.Fatalf("channel name %q accepted", ch.Name)
			}
			if _, err := semver.NewConstraint(ch.Constraint); err != nil {
				t.Fatalf("channel %s: constraint %q accepted: %v", ch.Name, ch.Constraint, err)
			}
			if i > 0 && cfg.Channels[i-1].Name >= ch.Name {
				t.Fatalf("channels not sorted, or repeated: %q then %q", cfg.Channels[i-1].Name, ch.Name)
			}
		}
		if cfg.BaseURL != "" {
			u, err := url.Parse(cfg.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.HasSuffix(cfg.BaseURL, "/") {
				t.Fatalf("baseURL %q accepted: %v", cfg.BaseURL, err)
			}
		}
	})
}
