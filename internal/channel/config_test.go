package channel

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig("/etc/cu/channels.yaml", []byte(`
source: https://charts.example.com
chart: harvester
ttl: 90s
channels:
  stable: ">=1.4.0 <2.0.0"
  latest: "*"
  devel: {constraint: "*", devel: true}
baseURL: https://charts.example.com/releases/
`))
	require.NoError(t, err)
	assert.Equal(t, &Config{
		File: "/etc/cu/channels.yaml", Source: "https://charts.example.com", Chart: "harvester", TTL: 90 * time.Second,
		Channels: []Channel{
			{Name: "devel", Constraint: "*", Devel: true},
			{Name: "latest", Constraint: "*"},
			{Name: "stable", Constraint: ">=1.4.0 <2.0.0"},
		},
		BaseURL: "https://charts.example.com/releases",
	}, cfg)

	cfg, err = ParseConfig("/etc/cu/channels.yaml", []byte("source: charts\nchart: app\ncaFile: ca.pem\nchannels: {latest: '*'}\n"))
	require.NoError(t, err)
	assert.Equal(t, DefaultTTL, cfg.TTL)
	assert.Equal(t, filepath.FromSlash("/etc/cu/charts"), cfg.Source, "relative to the file")
	assert.Equal(t, filepath.FromSlash("/etc/cu/ca.pem"), cfg.CAFile)
}

func TestParseConfigErrors(t *testing.T) {
	const head = "source: https://c.example.com\nchart: app\n"
	tests := []struct{ name, yaml, want string }{
		{"empty", "", "c.yaml: empty configuration"},
		{"not a map", "- a\n", "c.yaml:1: want a map"},
		{"syntax", "source: [\n", "c.yaml:1: invalid YAML: did not find expected node content"},
		{"unknown field", head + "channels: {a: '*'}\nttll: 5s\n", "c.yaml:4: ttll: unknown field (want one of source, chart, ttl, caFile, channels, baseURL)"},
		{"repeated field", head + "chart: again\nchannels: {a: '*'}\n", "c.yaml:3: chart: duplicate field (first at line 2)"},
		{"missing chart", "source: x\nchannels: {a: '*'}\n", `c.yaml:1: missing required field "chart"`},
		{"empty source", "source: ''\nchart: a\nchannels: {a: '*'}\n", "c.yaml:1: source: must not be empty"},
		{"chart not a string", "source: x\nchart: [a]\nchannels: {a: '*'}\n", "c.yaml:2: chart: want a string"},
		{"missing channels", head, `c.yaml:1: missing required field "channels"`},
		{"no channels", head + "channels: {}\n", "c.yaml:3: channels: want a map of channel names"},
		{"bad ttl", head + "ttl: soon\nchannels: {a: '*'}\n", `c.yaml:3: ttl: want a positive duration such as 60s or 5m, not "soon"`},
		{"negative ttl", head + "ttl: -5s\nchannels: {a: '*'}\n", "c.yaml:3: ttl: want a positive duration"},
		{"bad constraint", head + "channels:\n  a: '*'\n  b: '>=nope'\n", `c.yaml:5: channels.b: version constraint ">=nope"`},
		{"bad channel name", head + "channels:\n  'a/b': '*'\n", `c.yaml:4: channels["a/b"]: a channel name is`},
		{"channel without constraint", head + "channels:\n  a:\n", `c.yaml:4: channels.a: missing a constraint`},
		{"unknown channel field", head + "channels:\n  a: {constraint: '*', prerelease: true}\n", "c.yaml:4: channels.a.prerelease: unknown field (want one of constraint, devel)"},
		{"devel not a bool", head + "channels:\n  a: {constraint: '*', devel: 'yes'}\n", "c.yaml:4: channels.a.devel: want true or false"},
		{"channel as a list", head + "channels:\n  a: ['*']\n", "c.yaml:4: channels.a: want a constraint, or a map"},
		{"bad baseURL", head + "channels: {a: '*'}\nbaseURL: /releases\n", `c.yaml:4: baseURL: want an http(s) URL without query or fragment, not "/releases"`},
		{"baseURL with query", head + "channels: {a: '*'}\nbaseURL: https://x/r?a=b\n", "c.yaml:4: baseURL: want an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("c.yaml", []byte(tt.yaml))
			require.Error(t, err)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoadConfig(t *testing.T) {
	_, err := LoadConfig("")
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	_, err = LoadConfig(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.ErrorContains(t, err, "missing.yaml")

	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, "channels.yaml"), "source: charts\nchart: app\nchannels: {latest: '*'}\n")
	cfg, err := LoadConfig(file)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "charts"), cfg.Source)
}
