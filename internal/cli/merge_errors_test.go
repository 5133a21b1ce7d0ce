package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// Every bad input exits 2 with nothing on stdout, and stderr names the
// input (flag, file) and what is wrong in it.
func TestMergeBadInput(t *testing.T) {
	ex := bundledExample(t)
	dir := t.TempDir()
	file := func(name, content string) string { return writeFile(t, dir, name, content) }
	missing := filepath.Join(dir, "missing.yaml")
	// the example with one flag replaced
	with := func(flag, value string, extra ...string) []string {
		args := ex.args()
		for i := range args {
			if args[i] == flag {
				args[i+1] = value
				return append(args, extra...)
			}
		}
		return append(append(args, flag, value), extra...)
	}
	policy := func(name, content string) []string { return with("--policy", file(name, content)) }

	notChart := filepath.Join(dir, "not-a-chart")
	writeFile(t, notChart, "values.yaml", "a: 1\n")
	corrupt := file("corrupt.tgz", "this is not a gzip archive\n")
	// a real archive cut in the middle
	truncated := tarChart(t, ex.chart, "demo-app", filepath.Join(dir, "truncated.tgz"))
	data, err := os.ReadFile(truncated)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		// --values
		{"missing --values",
			[]string{"merge", "--chart", ex.chart}, []string{"--values", "required"}},
		{"empty --values",
			with("--values", ""), []string{"--values", "required"}},
		{"values file missing",
			with("--values", missing), []string{"--values", missing, "no such file"}},
		{"values file is a directory",
			with("--values", dir), []string{"--values", dir}},
		{"values invalid YAML",
			with("--values", file("bad.yaml", "a: [1, 2\n")), []string{"--values", filepath.Join(dir, "bad.yaml"), "invalid YAML", "line"}},
		{"values a list",
			with("--values", file("list.yaml", "- a\n- b\n")), []string{"--values", filepath.Join(dir, "list.yaml"), "must be a map", "list"}},
		{"values a string",
			with("--values", file("string.yaml", "just words\n")), []string{"--values", filepath.Join(dir, "string.yaml"), "must be a map", "string"}},
		{"values a number",
			with("--values", file("number.yaml", "42\n")), []string{"--values", filepath.Join(dir, "number.yaml"), "must be a map", "number"}},

		// --chart, --old-chart
		{"missing --chart",
			[]string{"merge", "--values", ex.values}, []string{"--chart", "required"}},
		{"chart path missing",
			with("--chart", filepath.Join(dir, "nope")), []string{"--chart", filepath.Join(dir, "nope"), "no such file"}},
		{"chart directory without Chart.yaml",
			with("--chart", notChart), []string{"--chart", notChart, "Chart.yaml"}},
		{"chart corrupt .tgz",
			with("--chart", corrupt), []string{"--chart", corrupt, "archive"}},
		{"chart truncated .tgz",
			with("--chart", truncated), []string{"--chart", truncated}},
		{"old chart path missing",
			with("--old-chart", filepath.Join(dir, "nope")), []string{"--old-chart", filepath.Join(dir, "nope"), "no such file"}},
		{"old chart directory without Chart.yaml",
			with("--old-chart", notChart), []string{"--old-chart", notChart, "Chart.yaml"}},
		{"old chart corrupt .tgz",
			with("--old-chart", corrupt), []string{"--old-chart", corrupt, "archive"}},

		// --policy
		{"policy file missing",
			with("--policy", missing), []string{"--policy", missing, "no such file"}},
		{"policy invalid YAML",
			policy("p-yaml.yaml", "rules: [\n"), []string{"--policy", filepath.Join(dir, "p-yaml.yaml") + ":", "invalid YAML"}},
		{"policy rules not a list",
			policy("p-rules.yaml", "rules: {path: a}\n"), []string{filepath.Join(dir, "p-rules.yaml") + ":1", "rules"}},
		{"unknown policy",
			policy("p-unknown.yaml", "rules:\n- {path: a.b, policy: prefer-magic}\n"),
			[]string{"--policy", filepath.Join(dir, "p-unknown.yaml") + ":2", "rules[1].policy", `"prefer-magic"`}},
		{"adopt with a source",
			policy("p-adopt.yaml", "rules:\n- {path: a.b, policy: adopt, source: {apiVersion: v1, kind: ConfigMap, name: x}}\n"),
			[]string{filepath.Join(dir, "p-adopt.yaml") + ":2", "policy adopt takes no source"}},
		{"unknown field in a rule",
			policy("p-field.yaml", "rules:\n- {path: a.b, policy: user, sauce: hot}\n"),
			[]string{filepath.Join(dir, "p-field.yaml") + ":2", "rules[1].sauce", "unknown field"}},
		{"unknown top-level field",
			policy("p-top.yaml", "rules: []\nmigration: []\n"),
			[]string{filepath.Join(dir, "p-top.yaml") + ":2", "migration", "unknown field"}},
		{"unknown field in a migration",
			policy("p-mfield.yaml", "migrations:\n- name: m\n  expr: del(.a)\n  when: always\n"),
			[]string{filepath.Join(dir, "p-mfield.yaml") + ":4", "migrations[1].when", "unknown field"}},
		{"bad path pattern",
			policy("p-path.yaml", "rules:\n- {path: a.b, policy: user}\n- {path: \"a..b\", policy: chart}\n"),
			[]string{filepath.Join(dir, "p-path.yaml") + ":3", "rules[2].path", `"a..b"`}},
		{"rule without path",
			policy("p-nopath.yaml", "rules:\n- {policy: chart}\n"),
			[]string{filepath.Join(dir, "p-nopath.yaml") + ":2", "rules[1]", `missing required field "path"`}},
		{"rule yq expression does not parse",
			policy("p-expr.yaml", "rules:\n- path: a\n  policy: live\n  source: {apiVersion: v1, kind: ConfigMap, name: c}\n  expr: '.data |||'\n"),
			[]string{filepath.Join(dir, "p-expr.yaml") + ":5", "rules[1].expr", ".data |||", "does not parse"}},
		{"migration yq expression does not parse",
			policy("p-mexpr.yaml", "migrations:\n- {name: m, expr: 'del(.a'}\n"),
			[]string{filepath.Join(dir, "p-mexpr.yaml") + ":2", "migrations[1].expr", "del(.a", "does not parse"}},
		{"migration without expr",
			policy("p-noexpr.yaml", "migrations:\n- {name: m, from: '<2.0.0'}\n"),
			[]string{filepath.Join(dir, "p-noexpr.yaml") + ":2", "migrations[1]", `missing required field "expr"`}},
		{"bad from constraint",
			policy("p-from.yaml", "migrations:\n- {name: m, from: '<<>1.x', expr: 'del(.a)'}\n"),
			[]string{filepath.Join(dir, "p-from.yaml") + ":2", "migrations[1].from", "<<>1.x"}},
		{"bad to constraint",
			policy("p-to.yaml", "migrations:\n- {name: m, to: 'soon', expr: 'del(.a)'}\n"),
			[]string{filepath.Join(dir, "p-to.yaml") + ":2", "migrations[1].to", "soon"}},
		{"duplicate migration name",
			policy("p-dup.yaml", "migrations:\n- {name: m, expr: 'del(.a)'}\n- {name: m, expr: 'del(.b)'}\n"),
			[]string{filepath.Join(dir, "p-dup.yaml") + ":3", "migrations[2].name", `"m"`}},
		{"live rule without source",
			policy("p-nosource.yaml", "rules:\n- {path: a, policy: live, expr: '.x'}\n"),
			[]string{filepath.Join(dir, "p-nosource.yaml") + ":2", "rules[1]", "source"}},
		{"once rule without source",
			policy("p-nosource-once.yaml", "rules:\n- {path: a, policy: once, expr: '.x'}\n"),
			[]string{filepath.Join(dir, "p-nosource-once.yaml") + ":2", "rules[1]", "source"}},
		{"source without name",
			policy("p-noname.yaml", "rules:\n- {path: a, policy: live, expr: '.x', source: {apiVersion: v1, kind: ConfigMap}}\n"),
			[]string{filepath.Join(dir, "p-noname.yaml") + ":2", "rules[1].source", "name"}},

		// --live
		{"live file missing",
			with("--live", missing), []string{"--live", missing, "no such file"}},
		{"live invalid YAML",
			with("--live", file("l-yaml.yaml", "apiVersion: v1\nkind: [\n")), []string{"--live", filepath.Join(dir, "l-yaml.yaml"), "document 1", "invalid YAML"}},
		{"live object without name",
			with("--live", file("l-name.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Secret\nmetadata: {namespace: x}\n")),
			[]string{"--live", filepath.Join(dir, "l-name.yaml"), "document 2", "metadata.name"}},
		{"live object without kind",
			with("--live", file("l-kind.yaml", "apiVersion: v1\nmetadata: {name: a}\n")),
			[]string{"--live", filepath.Join(dir, "l-kind.yaml"), "document 1", "kind"}},

		// --set, -f
		{"--set without =",
			with("--set", "noequals"), []string{"--set", "noequals"}},
		{"--set with a bad index",
			with("--set", "a[x]=1"), []string{"--set", "a[x]=1"}},
		{"--set without a key",
			with("--set", "=bar"), []string{"--set", `"=bar"`, "no key before =", "want KEY=VALUE"}},
		{"-f file missing",
			with("-f", missing), []string{"-f", missing, "no such file"}},
		{"-f file a list",
			with("-f", file("f-list.yaml", "- a\n")), []string{"-f", filepath.Join(dir, "f-list.yaml"), "must be a map"}},
		{"-f file a scalar",
			with("-f", file("f-scalar.yaml", "true\n")), []string{"-f", filepath.Join(dir, "f-scalar.yaml"), "must be a map"}},
		{"-f file invalid YAML",
			with("--file", file("f-yaml.yaml", "a: {\n")), []string{"-f", filepath.Join(dir, "f-yaml.yaml"), "invalid YAML"}},

		// other flags
		{"bad -o",
			with("-o", "xml"), []string{"-o", `"xml"`, "yaml, json or table"}},
		{"bad --output",
			with("--output", "YAML"), []string{"-o", `"YAML"`}},
		{"bad --from-version",
			with("--from-version", "banana"), []string{"--from-version", `"banana"`, "semantic version"}},
		{"bad --to-version",
			with("--to-version", "two"), []string{"--to-version", `"two"`, "semantic version"}},
		{"unknown flag",
			with("--bogus", "x"), []string{"bogus"}},
		{"flag without its value",
			[]string{"merge", "--values", ex.values, "--chart"}, []string{"chart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := noderun.CLI(t, tt.args...).Outputs()
			assert.Equal(t, 2, code, "exit code; stderr:\n%s", stderr)
			assert.Empty(t, stdout)
			for _, want := range tt.want {
				assert.Contains(t, stderr, want)
			}
			assert.True(t, strings.HasPrefix(stderr, "chart-upgrader: "), "stderr:\n%s", stderr)
		})
	}
}

// A bad value in an environment variable is reported like a bad flag.
func TestMergeBadInputFromEnv(t *testing.T) {
	ex := bundledExample(t)
	t.Setenv("CHART_UPGRADER_VALUES", ex.values)
	t.Setenv("CHART_UPGRADER_CHART", ex.chart)
	t.Setenv("CHART_UPGRADER_FROM_VERSION", "banana")
	code, stdout, stderr := noderun.CLI(t, "merge").Outputs()
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "--from-version")
	assert.Contains(t, stderr, "banana")
}

// A readonly value changed by an override or a migration, values the
// chart's schema rejects, and a chart that does not render are refused:
// exit 3, no values on stdout, the reason on stderr.
func TestMergeRefused(t *testing.T) {
	ex := bundledExample(t)
	dir := t.TempDir()
	dnsFile := writeFile(t, dir, "dns.yaml", "promote:\n  clusterDNS: 10.43.0.10\n")
	migrate := writeFile(t, dir, "migrate.yaml", `rules:
- {path: "promote.**", policy: readonly}
migrations:
- {name: move-dns, from: "<2.0.0", expr: '.promote.clusterDNS = "10.43.0.10"'}
`)
	// a user value that differs from the old default: removing it would
	// pin the old default, which changes the effective value
	customCIDR := writeFile(t, dir, "custom-cidr.yaml", "promote:\n  clusterPodCIDR: 10.99.0.0/16\n  clusterServiceCIDR: 10.53.0.0/16\n  clusterDNS: 10.53.0.10\n")
	deleting := writeFile(t, dir, "delete.yaml", `rules:
- {path: "promote.**", policy: readonly}
migrations:
- {name: forget-cidr, expr: 'del(.promote.clusterPodCIDR)'}
`)

	// a chart whose template requires a value
	chart := filepath.Join(dir, "needs-x")
	writeFile(t, chart, "Chart.yaml", "apiVersion: v2\nname: needs-x\nversion: 0.1.0\n")
	writeFile(t, chart, "values.yaml", "y: 1\n")
	writeFile(t, chart, "templates/cm.yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  x: {{ required \"x is required\" .Values.x | quote }}\n")
	noX := writeFile(t, dir, "no-x.yaml", "y: 2\n")
	// and one whose template renders invalid YAML
	broken := filepath.Join(dir, "broken")
	writeFile(t, broken, "Chart.yaml", "apiVersion: v2\nname: broken\nversion: 0.1.0\n")
	writeFile(t, broken, "templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n")

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"readonly changed by --set",
			ex.args("--set", "promote.clusterDNS=10.43.0.10"),
			[]string{"readonly", "promote.clusterDNS", "by --set promote.clusterDNS"}},
		{"readonly changed by -f",
			ex.args("-f", dnsFile),
			[]string{"readonly", "promote.clusterDNS", dnsFile}},
		{"readonly removed by --set null",
			ex.args("--set", "promote.clusterPodCIDR=null"),
			[]string{"readonly", "promote.clusterPodCIDR"}},
		{"readonly changed by a migration",
			[]string{"merge", "--values", ex.values, "--old-chart", ex.oldChart, "--chart", ex.chart, "--policy", migrate},
			[]string{"readonly", "promote.clusterDNS", "migration move-dns"}},
		{"readonly removed by a migration",
			[]string{"merge", "--values", customCIDR, "--old-chart", ex.oldChart, "--chart", ex.chart, "--policy", deleting},
			[]string{"readonly", "promote.clusterPodCIDR", "migration forget-cidr"}},
		{"schema maximum",
			ex.args("--set", "storageClass.replicaCount=9"),
			[]string{"demo-app", "schema", "/storageClass/replicaCount", "maximum"}},
		{"schema type",
			ex.args("--set", "storageClass.defaultStorageClass=maybe"),
			[]string{"demo-app", "schema", "/storageClass/defaultStorageClass"}},
		{"schema required",
			ex.args("--set", "promote=null"),
			[]string{"demo-app", "promote"}},
		{"template fails",
			[]string{"merge", "--values", noX, "--chart", chart},
			[]string{"needs-x", "x is required", "cm.yaml"}},
		{"template renders invalid YAML",
			[]string{"merge", "--values", noX, "--chart", broken},
			[]string{"broken", "cm.yaml"}},
	}
	for _, tt := range tests {
		for _, format := range []string{"yaml", "json", "table"} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				code, stdout, stderr := noderun.CLI(t, append(tt.args, "-o", format)...).Outputs()
				assert.Equal(t, 3, code, "exit code; stderr:\n%s", stderr)
				for _, want := range tt.want {
					assert.Contains(t, stderr, want)
				}
				if format == "table" {
					assert.Empty(t, stdout, "refused: no values")
					return
				}
				// -o json and -o yaml: one object on stdout, the refusal
				// and not the values
				var obj struct {
					Error struct {
						ExitCode int
						Meaning  string
						Reasons  []string
					}
					Report map[string]any
				}
				require.NoError(t, yaml.Unmarshal([]byte(stdout), &obj), stdout)
				assert.Equal(t, 3, obj.Error.ExitCode)
				assert.Equal(t, "refused", obj.Error.Meaning)
				require.Len(t, obj.Error.Reasons, 1)
				for _, want := range tt.want {
					assert.Contains(t, obj.Error.Reasons[0]+fmt.Sprint(obj.Report), want)
				}
			})
		}
	}

	// the chart renders once x is given
	runOK(t, "merge", "--values", noX, "--chart", chart, "--set", "x=hello")
}
