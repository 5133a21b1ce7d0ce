package yamlfile_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/channel"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// lines joins lines into a file; lines[i] is line i+1.
func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

// kind is one kind of configuration file read with this package.
type kind struct {
	file  string
	parse func(file string, data []byte) error
	good  string // a valid file, for the control
}

var kinds = map[string]kind{
	"spec": {
		file:  "spec.yaml",
		parse: func(f string, d []byte) error { _, err := spec.ParseSpec(f, d, targets.Kinds()); return err },
		good: lines(
			`apiVersion: chart-upgrader.io/v1alpha1`, // 1
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`, // 5
			`  migrations: [{name: m, from: "<1.0.0", expr: .a}]`,
			`  wait: {timeout: 5m}`,
		),
	},
	"policy": {
		file:  "policy.yaml",
		parse: func(f string, d []byte) error { _, err := spec.ParsePolicy(f, d); return err },
		good: lines(
			`rules:`, // 1
			`- {path: a.b, policy: chart}`,
			`migrations:`,
			`- {name: m, from: "<1.0.0", expr: .a}`,
		),
	},
	"channel config": {
		file:  "channels.yaml",
		parse: func(f string, d []byte) error { _, err := channel.ParseConfig(f, d); return err },
		good: lines(
			`source: https://charts.example.com`, // 1
			`chart: harvester`,
			`channels:`,
			`  stable: ">=1.4.0 <2.0.0"`,
			`  devel: {constraint: "*", devel: true}`, // 5
			`ttl: 60s`,
		),
	},
}

// TestStrictEverywhere runs each strictness case against the upgrade spec,
// the policy file and the channel server configuration: every one is
// refused as bad input, as a *yamlfile.Error naming the file, the line and
// the field.
func TestStrictEverywhere(t *testing.T) {
	tests := []struct {
		kind, name string
		in         string
		line       int    // 0: none
		field      string // "": the document or its root
		frag       string
	}{
		// The upgrade spec.
		{"spec", "unknown field", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`,
			`  wiat: {timeout: 5m}`),
			6, "charts[1].wiat", "unknown field (want one of target, chart, rules, migrations, wait, apply, images, helmchart, release)"},
		{"spec", "a number where a string belongs", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`,
			`  migrations: [{name: m, from: 1.10, expr: .a}]`),
			6, "charts[1].migrations[1].from", `want a string, not a number (write "1.10" for the text)`},
		{"spec", "a bool where a string belongs", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: true, source: /charts}`),
			5, "charts[1].chart.name", `want a string, not a bool (write "true" for the text)`},
		{"spec", "a map where a string belongs", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: {a: b}, source: /charts}`),
			5, "charts[1].chart.name", "want a string, not a map"},
		{"spec", "a list where a string belongs", lines(
			`apiVersion: [chart-upgrader.io/v1alpha1]`,
			`kind: UpgradeSpec`),
			1, "apiVersion", "want a string, not a list"},
		{"spec", "a number where a duration belongs", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`,
			`  wait: {timeout: 300}`),
			6, "charts[1].wait.timeout", "want a positive duration such as 20m or 1h30m, not a number (300)"},
		{"spec", "a string where a map belongs", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: harvester`),
			5, "charts[1].chart", "want a map, not a string"},
		{"spec", "a string where a list belongs", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts: harvester`),
			3, "charts", "want a list, not a string"},
		{"spec", "second document", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`,
			`---`,
			`kind: UpgradeSpec`),
			6, "", "a second YAML document; the file must hold one"},
		{"spec", "empty", "", 0, "", "empty upgrade spec (want apiVersion: chart-upgrader.io/v1alpha1, kind: UpgradeSpec and charts)"},
		{"spec", "only a comment", "# later\n", 0, "", "empty upgrade spec"},
		{"spec", "duplicate key", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`,
			`  chart: {name: harvester, source: /charts}`),
			6, "charts[1].chart", "duplicate field (first at line 5)"},
		{"spec", "duplicate top-level key", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`kind: UpgradeSpec`),
			3, "kind", "duplicate field (first at line 2)"},
		{"spec", "a number as a key", lines(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`,
			`  1: x`),
			6, "charts[1]", `want a field name, not a number (write "1" for the text)`},

		// The policy file.
		{"policy", "unknown field", lines(`rules:`, `- {path: a.b, policy: chart}`, `ruls: []`),
			3, "ruls", "unknown field (want one of rules, migrations)"},
		{"policy", "a number where a string belongs", lines(`migrations:`, `- {name: m, from: 1.10, expr: .a}`),
			2, "migrations[1].from", `want a string, not a number (write "1.10" for the text)`},
		{"policy", "an integer where a string belongs", lines(`migrations:`, `- {name: 7, expr: .a}`),
			2, "migrations[1].name", `want a string, not a number (write "7" for the text)`},
		{"policy", "a bool where a string belongs", lines(`rules:`, `- {path: a.b, policy: true}`),
			2, "rules[1].policy", "want a string, not a bool"},
		{"policy", "a map where a string belongs", lines(`rules:`, `- {path: {a: b}, policy: chart}`),
			2, "rules[1].path", "want a string, not a map"},
		{"policy", "a list where a string belongs", lines(`rules:`, `- {path: [a], policy: chart}`),
			2, "rules[1].path", "want a string, not a list"},
		{"policy", "a string where a map belongs", lines(`rules:`, `- a.b`),
			2, "rules[1]", "want a map, not a string"},
		{"policy", "a string where a list belongs", lines(`rules: a.b`),
			1, "rules", "want a list, not a string"},
		{"policy", "second document", lines(`rules: []`, `---`, `migrations: []`),
			2, "", "a second YAML document; the file must hold one"},
		{"policy", "empty", "", 0, "", "empty policy file (want rules, migrations or both; {} is a policy without rules)"},
		{"policy", "only null", "null\n", 0, "", "empty policy file"},
		{"policy", "duplicate key", lines(`rules: []`, `migrations: []`, `rules: []`),
			3, "rules", "duplicate field (first at line 1)"},
		{"policy", "a bool as a key", lines(`rules:`, `- {path: a, policy: chart, true: 1}`),
			2, "rules[1]", "want a field name, not a bool"},

		// The channel server configuration.
		{"channel config", "unknown field", lines(`source: https://charts.example.com`, `chart: harvester`, `channels: {stable: "*"}`, `tll: 60s`),
			4, "tll", "unknown field (want one of source, chart, ttl, caFile, channels, baseURL)"},
		{"channel config", "a number where a string belongs", lines(`source: https://charts.example.com`, `chart: harvester`, `channels:`, `  stable: 1.4`),
			4, "channels.stable", `want a string, not a number (write "1.4" for the text)`},
		{"channel config", "a bool where a string belongs", lines(`source: https://charts.example.com`, `chart: true`, `channels: {stable: "*"}`),
			2, "chart", "want a string, not a bool"},
		{"channel config", "a map where a string belongs", lines(`source: https://charts.example.com`, `chart: {name: harvester}`, `channels: {stable: "*"}`),
			2, "chart", "want a string, not a map"},
		{"channel config", "a list where a string belongs", lines(`source: [https://charts.example.com]`, `chart: harvester`, `channels: {stable: "*"}`),
			1, "source", "want a string, not a list"},
		{"channel config", "a number where a duration belongs", lines(`source: https://charts.example.com`, `chart: harvester`, `channels: {stable: "*"}`, `ttl: 60`),
			4, "ttl", "want a positive duration such as 60s or 5m, not a number (60)"},
		{"channel config", "a string where a bool belongs", lines(`source: https://charts.example.com`, `chart: harvester`, `channels:`, `  devel: {constraint: "*", devel: "true"}`),
			4, "channels.devel.devel", "want true or false, not a string"},
		{"channel config", "a string where a map belongs", lines(`source: https://charts.example.com`, `chart: harvester`, `channels: stable`),
			3, "channels", "want a map of channel names to constraints"},
		{"channel config", "second document", lines(`source: https://charts.example.com`, `chart: harvester`, `channels: {stable: "*"}`, `---`, `ttl: 5s`),
			4, "", "a second YAML document; the file must hold one"},
		{"channel config", "empty", "", 0, "", "empty configuration (want source, chart and channels)"},
		{"channel config", "only a comment", "# soon\n", 0, "", "empty configuration"},
		{"channel config", "duplicate key", lines(`source: https://charts.example.com`, `chart: harvester`, `channels: {stable: "*"}`, `chart: other`),
			4, "chart", "duplicate field (first at line 2)"},
		{"channel config", "duplicate channel", lines(`source: https://charts.example.com`, `chart: harvester`, `channels:`, `  stable: "*"`, `  stable: "<2"`),
			5, "channels.stable", "duplicate field (first at line 4)"},
		{"channel config", "a number as a channel name", lines(`source: https://charts.example.com`, `chart: harvester`, `channels:`, `  1.4: "~1.4"`),
			4, "channels", `want a field name, not a number (write "1.4" for the text)`},
		{"channel config", "a merge key", lines(`<<: {chart: harvester}`, `source: https://charts.example.com`),
			1, "", "merge keys (<<) are not supported"},
		{"channel config", "a merge key in a channel", lines(`source: https://charts.example.com`, `chart: harvester`, `channels:`, `  a: {<<: {constraint: "*"}}`),
			4, "channels.a", "merge keys (<<) are not supported"},
	}
	for name, k := range kinds {
		t.Run(name+"/control", func(t *testing.T) {
			require.NoError(t, k.parse(k.file, []byte(k.good)))
		})
	}
	for _, tt := range tests {
		k, ok := kinds[tt.kind]
		require.True(t, ok, tt.kind)
		t.Run(tt.kind+"/"+tt.name, func(t *testing.T) {
			err := k.parse(k.file, []byte(tt.in))
			require.Error(t, err)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.Equal(t, outcome.ExitBadInput, outcome.Code(err))
			var ferr *yamlfile.Error
			require.True(t, errors.As(err, &ferr), "not a *yamlfile.Error: %v", err)
			assert.Equal(t, k.file, ferr.File)
			assert.Equal(t, tt.line, ferr.Line, "line of %v", err)
			assert.Equal(t, tt.field, ferr.Field, "field of %v", err)
			assert.Contains(t, ferr.Err.Error(), tt.frag)

			want := k.file
			if tt.line > 0 {
				want += ":" + strconv.Itoa(tt.line)
			}
			want += ": "
			if tt.field != "" {
				want += tt.field + ": "
			}
			assert.True(t, strings.HasPrefix(err.Error(), want+tt.frag), "want %q, got %q", want+tt.frag, err.Error())
		})
	}
}
