// Package badinput runs every command of chart-upgrader on bad input, each
// row against a real API server holding an installed ManagedChart, and
// checks the documented exit code, a message naming the input, and that
// nothing was written to the cluster (by the API server's audit log).
package badinput

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/cli"
)

// row is one bad input. Strings in args, env, files and want may use:
//
//	$DIR        the row's own temporary directory, where files are written
//	$URL        the row's loopback server (when server is set)
//	$NS, $MC    the namespace and name of the installed ManagedChart
//	$TARGET     managedchart/$NS/$MC
//	$CHARTS     a directory holding the example charts 1.0.0 and 2.0.0
//	$EX         package/examples of the repository
type row struct {
	name    string
	args    []string          // after the program name
	cluster bool              // add --kubeconfig (unless given), --state-dir, --lock-file, --termination-log, --log-format json
	env     map[string]string // environment variables for the run
	files   map[string]string // text files under $DIR
	blobs   map[string][]byte // binary files under $DIR
	sparse  map[string]int64  // files of that many bytes (holes) under $DIR
	server  http.Handler      // served at $URL
	code    int               // the exit code
	want    []string          // fragments of stderr that name the input
}

// command is the command a row runs ("channel serve" for the subcommand).
func (r row) command() string {
	if len(r.args) > 1 && r.args[0] == "channel" {
		return "channel serve"
	}
	return r.args[0]
}

// A spec for the installed ManagedChart, with the chart entry replaced.
const specHead = "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"

func TestBadInputCorpus(t *testing.T) {
	w := newWorld(t)

	// the example charts as archives, and broken ones
	good1, good2 := w.chart("1.0.0"), w.chart("2.0.0")
	dotdot := w.chart("2.0.0", entry{name: "demo-app/../../escape.yaml", body: "x: 1\n"})
	absolute := w.chart("2.0.0", entry{name: "/etc/cron.d/chart-upgrader-test", body: "* * * * * root true\n"})
	symlink := w.chart("2.0.0", entry{name: "demo-app/templates/passwd.yaml", typeflag: '2', linkname: "/etc/passwd"})
	hardlink := w.chart("2.0.0", entry{name: "demo-app/templates/shadow.yaml", typeflag: '1', linkname: "/etc/shadow"})
	fifo := w.chart("2.0.0", entry{name: "demo-app/templates/fifo", typeflag: '6'})
	bomb := w.chart("2.0.0", entry{name: "demo-app/templates/huge.yaml", body: "# ", size: chart.MaxChartBytes + 1})
	nested := w.chart("2.0.0", entry{name: "demo-app/charts/sub.tgz", body: string(tgz(t,
		entry{name: "sub/Chart.yaml", body: "apiVersion: v2\nname: sub\nversion: 0.1.0\n"},
		entry{name: "sub/templates/key.yaml", typeflag: '2', linkname: "/root/.ssh/id_rsa"}))})
	truncated := good2[:len(good2)/2]
	notGzip := []byte("PK\x03\x04 this is a zip file, not a gzip-compressed tar archive")
	noFiles := tgz(t, entry{name: "demo-app/", typeflag: '5'})
	repoFiles := func(v2 http.Handler) map[string]http.Handler {
		return map[string]http.Handler{"charts/demo-app-1.0.0.tgz": blob(good1), "charts/demo-app-2.0.0.tgz": v2}
	}
	goodRepo := repo(repoIndex, repoFiles(blob(good2)))
	chartSpec := func(chartLines string) string {
		return specHead + "- target: {kind: ManagedChart, namespace: " + w.ns + ", name: " + w.name + "}\n" + chartLines
	}
	validSpec := chartSpec("  chart: {name: demo-app, source: " + w.charts + "}\n")
	upgrade := func(extra ...string) []string {
		return append([]string{"upgrade", "--target", "$TARGET", "--chart-source", "$CHARTS", "--version", "2.0.0", "--timeout", "30s"}, extra...)
	}
	preflight := func(extra ...string) []string {
		return append([]string{"preflight", "--target", "$TARGET", "--chart-source", "$CHARTS", "--version", "2.0.0"}, extra...)
	}
	merge := func(extra ...string) []string {
		return append([]string{"merge", "--values", "$EX/values.yaml", "--old-chart", "$EX/charts/demo-app-1.0.0",
			"--chart", "$EX/charts/demo-app-2.0.0", "--policy", "$EX/policy.yaml", "--live", "$EX/live.yaml"}, extra...)
	}
	mergeChart := func(chartPath string) []string {
		return []string{"merge", "--values", "$EX/values.yaml", "--chart", chartPath}
	}
	channelCfg := "source: $CHARTS\nchart: demo-app\nchannels:\n  stable: \">=1.0.0\"\n"

	rows := []row{
		// merge: files
		{name: "values file missing", args: merge("--values", "$DIR/nope.yaml"), code: 2,
			want: []string{"--values", "$DIR/nope.yaml", "no such file"}},
		{name: "values not YAML", args: merge("--values", "$DIR/values.yaml"), files: map[string]string{"values.yaml": "a: [1,\n"}, code: 2,
			want: []string{"--values $DIR/values.yaml"}},
		{name: "values not a map", args: merge("--values", "$DIR/values.yaml"), files: map[string]string{"values.yaml": "- a\n- b\n"}, code: 2,
			want: []string{"--values $DIR/values.yaml"}},
		{name: "no chart", args: []string{"merge", "--values", "$EX/values.yaml"}, code: 2, want: []string{"--chart is required"}},
		{name: "chart not gzip", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": notGzip}, code: 2,
			want: []string{"--chart", `"$DIR/c.tgz"`, "not a gzip-compressed chart archive"}},
		{name: "chart archive truncated", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": truncated}, code: 2,
			want: []string{`"$DIR/c.tgz"`, "corrupt chart archive"}},
		{name: "chart archive without files", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": noFiles}, code: 2,
			want: []string{`"$DIR/c.tgz"`, "holds no files"}},
		{name: "chart entry with ..", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": dotdot}, code: 2,
			want: []string{`"$DIR/c.tgz"`, `"demo-app/../../escape.yaml"`, "parent directory"}},
		{name: "chart entry with an absolute path", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": absolute}, code: 2,
			want: []string{`"$DIR/c.tgz"`, `"/etc/cron.d/chart-upgrader-test"`, "absolute path"}},
		{name: "chart entry a symlink", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": symlink}, code: 2,
			want: []string{`"$DIR/c.tgz"`, `"demo-app/templates/passwd.yaml"`, "symbolic link"}},
		{name: "chart entry a hard link", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": hardlink}, code: 2,
			want: []string{`"$DIR/c.tgz"`, `"demo-app/templates/shadow.yaml"`, "hard link"}},
		{name: "chart entry a fifo", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": fifo}, code: 2,
			want: []string{`"$DIR/c.tgz"`, `"demo-app/templates/fifo"`, "not a regular file"}},
		{name: "subchart archive with a symlink", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": nested}, code: 2,
			want: []string{`"$DIR/c.tgz"`, `subchart archive "charts/sub.tgz"`, `"sub/templates/key.yaml"`}},
		{name: "old chart archive over 64 MiB", args: merge("--old-chart", "$DIR/old.tgz"), sparse: map[string]int64{"old.tgz": chart.MaxArchiveBytes + 1}, code: 2,
			want: []string{"--old-chart", `"$DIR/old.tgz"`, "larger than the limit of 64 MiB"}},
		{name: "chart decompressing over 256 MiB", args: mergeChart("$DIR/c.tgz"), blobs: map[string][]byte{"c.tgz": bomb}, code: 2,
			want: []string{`"$DIR/c.tgz"`, "larger than the limit of 256 MiB"}},
		{name: "chart directory without Chart.yaml", args: mergeChart("$DIR/empty"), files: map[string]string{"empty/values.yaml": "a: 1\n"}, code: 2,
			want: []string{`"$DIR/empty"`, "no Chart.yaml"}},
		// merge: policy file
		{name: "policy unknown policy", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "rules:\n- {path: a.b, policy: prefer-magic}\n"}, code: 2,
			want: []string{"--policy", "$DIR/policy.yaml:2", "rules[1].policy", `"prefer-magic"`}},
		{name: "policy adopt with a source", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "rules:\n- {path: a.b, policy: adopt, source: {apiVersion: v1, kind: ConfigMap, name: x}, expr: .a}\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:2", "policy adopt takes no source"}},
		{name: "policy bad path pattern", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "rules:\n- {path: 'a..b', policy: user}\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:2", "rules[1].path"}},
		{name: "policy yq expression that does not parse", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "migrations:\n- {name: m, expr: 'del(.a'}\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:2", "migrations[1].expr"}},
		{name: "policy version constraint that does not parse", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "migrations:\n- {name: m, from: '<<1.x', expr: '.'}\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:2", "migrations[1].from"}},
		{name: "policy unknown field", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "rules:\n- path: a\n  polcy: user\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:3", "rules[1].polcy"}},
		{name: "policy live rule without source", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "rules:\n- {path: a.b, policy: live, expr: .x}\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:2", "rules[1]"}},
		{name: "policy empty file", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "# nothing yet\n"}, code: 2,
			want: []string{"--policy", "$DIR/policy.yaml", "empty policy file"}},
		{name: "policy second document", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "rules: []\n---\nmigrations: []\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:2", "a second YAML document"}},
		{name: "policy migration version written as a number", args: merge("--policy", "$DIR/policy.yaml"),
			files: map[string]string{"policy.yaml": "migrations:\n- {name: m, from: 1.10, expr: '.'}\n"}, code: 2,
			want: []string{"$DIR/policy.yaml:2", "migrations[1].from", "want a string, not a number"}},
		// merge: other flags and their environment variables
		{name: "live file not YAML", args: merge("--live", "$DIR/live.yaml"), files: map[string]string{"live.yaml": "kind: [\n"}, code: 2,
			want: []string{"--live $DIR/live.yaml"}},
		{name: "--set without a value", args: merge("--set", "image.tag"), code: 2, want: []string{"--set", `"image.tag"`}},
		{name: "-f file missing", args: merge("-f", "$DIR/extra.yaml"), code: 2, want: []string{"-f", "$DIR/extra.yaml"}},
		{name: "--set-json not JSON", args: merge("--set-json", "image={tag"), code: 2, want: []string{"--set-json", `"image={tag"`}},
		{name: "--set-string without a value", args: merge("--set-string", "image.tag"), code: 2, want: []string{"--set-string", `"image.tag"`}},
		{name: "--set-file file missing", args: merge("--set-file", "note=$DIR/note.txt"), code: 2, want: []string{"--set-file", "$DIR/note.txt", "no such file"}},
		{name: "--set-literal without a key", args: merge("--set-literal", "=x"), code: 2, want: []string{"--set-literal", "no key before ="}},
		{name: "-f as the only values", args: []string{"merge", "-f", "$EX/values.yaml", "--chart", "$EX/charts/demo-app-2.0.0"}, code: 2,
			want: []string{"--values is required", "the -f files are overrides"}},
		{name: "two inputs from standard input", args: merge("--values", "-", "-f", "-"), code: 2,
			want: []string{"--values -, --file -", "only one input can"}},
		{name: "an -o merge does not print", args: merge("-o", "xml"), code: 2, want: []string{`merge: -o "xml": want yaml, json or table`}},
		{name: "an -o plan does not print", args: []string{"plan", "--image", "r/x", "--version", "1.0.0", "-o", "text"}, code: 2, want: []string{`plan: -o "text": want yaml or json`}},
		{name: "completion for an unknown shell", args: []string{"completion", "powershell"}, code: 2, want: []string{`unknown shell "powershell"`}},
		{name: "--from-version not semver", args: merge("--from-version", "one.two"), code: 2, want: []string{"--from-version", `"one.two"`}},
		{name: "-o unknown format", args: merge("-o", "xml"), code: 2, want: []string{`-o "xml"`}},
		{name: "CHART_UPGRADER_VALUES names a missing file", args: []string{"merge", "--chart", "$EX/charts/demo-app-2.0.0"},
			env: map[string]string{"CHART_UPGRADER_VALUES": "$DIR/env-values.yaml"}, code: 2, want: []string{"--values", "$DIR/env-values.yaml"}},
		{name: "CHART_UPGRADER_OUTPUT unknown format", args: merge(), env: map[string]string{"CHART_UPGRADER_OUTPUT": "xml"}, code: 2,
			want: []string{`"xml"`}},
		{name: "unknown flag", args: merge("--bogus-flag", "x"), code: 2, want: []string{"bogus-flag"}},

		// upgrade: the spec
		{name: "spec missing", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true, code: 2,
			want: []string{"--spec", "$DIR/spec.yaml", "no such file"}},
		{name: "spec not YAML", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": specHead + "- target: {kind: ManagedChart\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:", "invalid YAML"}},
		{name: "spec unknown field", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": chartSpec("  chart: {name: demo-app, sorce: $CHARTS}\n")}, code: 2,
			want: []string{"$DIR/spec.yaml:5", "charts[1].chart.sorce"}},
		{name: "spec wrong kind", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": strings.Replace(validSpec, "UpgradeSpec", "UpgradePlan", 1)}, code: 2,
			want: []string{"$DIR/spec.yaml:2", "kind", `"UpgradePlan"`}},
		{name: "spec duplicate target", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec + strings.TrimPrefix(validSpec, specHead)}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[2].target", "duplicate target $TARGET"}},
		{name: "spec source with an unsupported scheme", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": chartSpec("  chart: {name: demo-app, source: 'ftp://charts.example.com/'}\n")}, code: 2,
			want: []string{"$DIR/spec.yaml:5", "charts[1].chart.source", "ftp://charts.example.com/"}},
		{name: "spec helmchart failurePolicy reinstall", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": specHead + "- target: {kind: HelmChart, namespace: $NS, name: hc-none}\n  helmchart: {failurePolicy: reinstall}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:5", "charts[1].helmchart.failurePolicy", "reinstall uninstalls the running chart", "keep"}},
		{name: "spec helmchart failurePolicy unknown", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": specHead + "- target: {kind: HelmChart, namespace: $NS, name: hc-none}\n  helmchart:\n    failurePolicy: sometimes\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].helmchart.failurePolicy", `unknown failure policy "sometimes" (want abort, retry or keep)`}},
		{name: "spec helmchart failurePolicy not a string", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": specHead + "- target: {kind: HelmChart, namespace: $NS, name: hc-none}\n  helmchart: {failurePolicy: 3}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:5", "charts[1].helmchart.failurePolicy"}},
		{name: "spec helmchart options on a ManagedChart", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec + "  helmchart: {failurePolicy: abort}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].helmchart", "only a target of kind HelmChart takes helmchart options (this one is a ManagedChart)"}},
		{name: "spec mapRemovedAPIs on a ManagedChart", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec + "  release: {mapRemovedAPIs: true}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].release", "only a target of kind Release takes release options (this one is a ManagedChart)"}},
		{name: "spec mapRemovedAPIs on a HelmChart", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": specHead + "- target: {kind: HelmChart, namespace: $NS, name: hc-none}\n  release: {mapRemovedAPIs: true}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:5", "charts[1].release", "only a target of kind Release takes release options (this one is a HelmChart)"}},
		{name: "spec mapRemovedAPIs not a boolean", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": specHead + "- target: {kind: Release, namespace: $NS, name: rel-none}\n  chart: {name: demo-app, source: $CHARTS}\n  release: {mapRemovedAPIs: sometimes}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].release.mapRemovedAPIs"}},
		{name: "spec helmchart unknown option", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": specHead + "- target: {kind: HelmChart, namespace: $NS, name: hc-none}\n  helmchart: {failurPolicy: abort}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:5", "charts[1].helmchart.failurPolicy", "unknown field (want one of failurePolicy)"}},
		{name: "spec wait settle not a duration", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec + "  wait: {settle: ten seconds}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].wait.settle", "ten seconds"}},
		{name: "spec wait errAppliedGrace not a duration", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec + "  wait: {errAppliedGrace: 1 minute}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].wait.errAppliedGrace", "1 minute"}},
		{name: "spec wait timeout not a duration", args: []string{"upgrade", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec + "  wait: {timeout: soon}\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].wait.timeout"}},
		{name: "spec and target together", args: append(upgrade(), "--spec", "$DIR/spec.yaml"), cluster: true,
			files: map[string]string{"spec.yaml": validSpec}, code: 2, want: []string{"--spec or --target"}},
		{name: "CHART_UPGRADER_SPEC names a missing file", args: []string{"upgrade"}, cluster: true,
			env: map[string]string{"CHART_UPGRADER_SPEC": "$DIR/env-spec.yaml"}, code: 2, want: []string{"$DIR/env-spec.yaml"}},
		// upgrade: the chart's CRDs with --target
		{name: "crds unknown policy", args: upgrade("--crds", "replace"), cluster: true, code: 2,
			want: []string{"--crds", "want skip, create, createReplace", `"replace"`}},
		{name: "crds empty policy", args: preflight("--crds", ""), cluster: true, code: 2,
			want: []string{"--crds", `not ""`}},
		{name: "crds-migrate without createReplace", args: upgrade("--crds", "create", "--crds-migrate"), cluster: true, code: 2,
			want: []string{"--crds-migrate needs --crds createReplace", `"create"`}},
		{name: "crds with a spec", args: []string{"upgrade", "--spec", "$DIR/spec.yaml", "--crds", "createReplace"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec}, code: 2, want: []string{"--crds go with --target", "(and apply.crds)"}},
		// upgrade: the target, the version, the chart source
		{name: "target of an unsupported kind", args: []string{"upgrade", "--target", "deployment/$NS/$MC", "--chart-source", "$CHARTS", "--version", "2.0.0"},
			cluster: true, code: 2, want: []string{"--target", `"deployment/$NS/$MC"`}},
		{name: "target without chart source", args: []string{"upgrade", "--target", "$TARGET", "--version", "2.0.0"}, cluster: true, code: 2,
			want: []string{"--chart-source is required"}},
		{name: "chart source missing", args: upgrade("--chart-source", "$DIR/none"), cluster: true, code: 2, want: []string{"$DIR/none"}},
		{name: "version not in the source", args: upgrade("--version", "9.9.9"), cluster: true, code: 2,
			want: []string{`"9.9.9"`, "$CHARTS", "available: 2.0.0, 1.0.0"}},
		{name: "no version at all", args: []string{"upgrade", "--target", "$TARGET", "--chart-source", "$CHARTS"}, cluster: true, code: 2,
			want: []string{"--version", "SYSTEM_UPGRADE_PLAN_LATEST_VERSION"}},
		{name: "SYSTEM_UPGRADE_PLAN_LATEST_VERSION not in the source", args: []string{"upgrade", "--target", "$TARGET", "--chart-source", "$CHARTS"},
			env: map[string]string{"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "7.7.7"}, cluster: true, code: 2, want: []string{`"7.7.7"`}},
		// HelmCharts: their values, their set entries, their chart source
		{name: "helmchart valuesContent not YAML", args: []string{"upgrade", "--target", "helmchart/$NS/hc-badyaml", "--version", "1.0.0"},
			cluster: true, code: 2, want: []string{"helmchart/$NS/hc-badyaml spec.valuesContent"}},
		{name: "helmchart valuesContent not a map", args: []string{"preflight", "--target", "helmchart/$NS/hc-notamap", "--version", "1.0.0"},
			cluster: true, code: 2, want: []string{"helmchart/$NS/hc-notamap spec.valuesContent"}},
		{name: "helmchart set entry Helm cannot parse", args: []string{"upgrade", "--target", "helmchart/$NS/hc-badset", "--version", "1.0.0"},
			cluster: true, code: 2, want: []string{"helmchart/$NS/hc-badset spec.set[\"image[x]\"]"}},
		{name: "helmchart missing", args: []string{"upgrade", "--target", "helmchart/$NS/hc-none", "--version", "1.0.0"},
			cluster: true, code: 3, want: []string{"helmchart $NS/hc-none not found"}},
		{name: "helmchart repo does not serve the version", args: []string{"upgrade", "--target", "helmchart/$NS/hc-repo", "--version", "9.9.9"},
			cluster: true, code: 2, want: []string{`"9.9.9"`, "available: 1.0.0"}},
		{name: "helmchart chart source does not serve the version", args: []string{"upgrade", "--target", "helmchart/$NS/hc-repo",
			"--chart-source", "$CHARTS", "--version", "3.0.0"}, cluster: true, code: 2, want: []string{`"3.0.0"`, "$CHARTS", "available: 2.0.0, 1.0.0"}},
		{name: "chart name not in the source", args: upgrade("--chart-name", "no-such-chart"), cluster: true, code: 2,
			want: []string{`"no-such-chart"`, "charts there: demo-app"}},
		{name: "source archive not gzip", args: upgrade("--chart-source", "$DIR/charts"), cluster: true,
			blobs: map[string][]byte{"charts/demo-app-2.0.0.tgz": notGzip}, code: 2,
			want: []string{"$DIR/charts/demo-app-2.0.0.tgz", "not a gzip-compressed chart archive"}},
		{name: "source archive with ..", args: upgrade("--chart-source", "$DIR/charts"), cluster: true,
			blobs: map[string][]byte{"charts/demo-app-2.0.0.tgz": dotdot}, code: 2,
			want: []string{`"$DIR/charts/demo-app-2.0.0.tgz"`, `"demo-app/../../escape.yaml"`}},
		{name: "policy of a target unknown policy", args: upgrade("--policy", "$DIR/policy.yaml"), cluster: true,
			files: map[string]string{"policy.yaml": "rules:\n- {path: '**.image.tag', policy: folow}\n"}, code: 2,
			want: []string{"--policy", "$DIR/policy.yaml:2", "rules[1].policy", `"folow"`}},
		{name: "--set that does not parse", args: upgrade("--set", "image.tag"), cluster: true, code: 2, want: []string{"--set", `"image.tag"`}},
		{name: "--set-json that does not parse", args: upgrade("--set-json", `{"a":`), cluster: true, code: 2, want: []string{"--set-json", "not a JSON object"}},
		{name: "--set-file of a missing file", args: upgrade("--set-file", "a=$DIR/none"), cluster: true, code: 2, want: []string{"--set-file", "$DIR/none"}},
		{name: "--set-string with --spec", args: []string{"upgrade", "--spec", "$EX/spec.yaml", "--set-string", "a=1"}, cluster: true, code: 2,
			want: []string{"the --set flags", "with --spec, put rules in the spec"}},
		{name: "-f file not YAML", args: upgrade("-f", "$DIR/extra.yaml"), cluster: true, files: map[string]string{"extra.yaml": "{{\n"}, code: 2,
			want: []string{"-f $DIR/extra.yaml"}},
		{name: "--timeout not a duration", args: upgrade("--timeout", "soon"), cluster: true, code: 2, want: []string{"soon", "timeout"}},
		{name: "CHART_UPGRADER_TIMEOUT not a duration", args: upgrade(), env: map[string]string{"CHART_UPGRADER_TIMEOUT": "soon"}, cluster: true, code: 2,
			want: []string{"CHART_UPGRADER_TIMEOUT", `"soon"`}},
		{name: "CHART_UPGRADER_ALLOW_DOWNGRADE not a bool", args: upgrade(), env: map[string]string{"CHART_UPGRADER_ALLOW_DOWNGRADE": "perhaps"}, cluster: true, code: 2,
			want: []string{"CHART_UPGRADER_ALLOW_DOWNGRADE", `"perhaps"`}},
		{name: "kubeconfig missing", args: upgrade("--kubeconfig", "$DIR/kubeconfig"), cluster: true, code: 2,
			want: []string{"--kubeconfig $DIR/kubeconfig"}},
		{name: "kubeconfig not a kubeconfig", args: upgrade("--kubeconfig", "$DIR/kubeconfig"), cluster: true,
			files: map[string]string{"kubeconfig": "clusters: 42\n"}, code: 2, want: []string{"--kubeconfig $DIR/kubeconfig"}},
		{name: "CA file missing", args: upgrade("--chart-source", "$URL", "--ca-file", "$DIR/ca.pem"), server: goodRepo, cluster: true, code: 2,
			want: []string{"$URL", "CA file", "$DIR/ca.pem"}},
		{name: "CA file without a certificate", args: upgrade("--chart-source", "$URL", "--ca-file", "$DIR/ca.pem"), server: goodRepo, cluster: true,
			files: map[string]string{"ca.pem": "not a certificate\n"}, code: 2, want: []string{`CA file "$DIR/ca.pem" holds no PEM certificate`}},
		// upgrade: a Helm repository answering badly
		{name: "repository index 404", args: upgrade("--chart-source", "$URL/nothing"), server: status(http.StatusNotFound), cluster: true, code: 2,
			want: []string{"$URL/nothing/index.yaml", "HTTP 404"}},
		{name: "repository index garbage", args: upgrade("--chart-source", "$URL"), server: garbage(), cluster: true, code: 2,
			want: []string{"reading repository index $URL/index.yaml"}},
		{name: "repository index redirect without Location", args: upgrade("--chart-source", "$URL"), server: redirectWithoutLocation(), cluster: true, code: 2,
			want: []string{"$URL/index.yaml", "HTTP 302"}},
		{name: "repository index over 32 MiB", args: upgrade("--chart-source", "$URL"), cluster: true,
			server: endless("apiVersion: v1\nentries: {}\n", chart.DefaultMaxIndexBytes+1<<20), code: 2,
			want: []string{"$URL/index.yaml", "larger than the limit of 32 MiB"}},
		{name: "repository index claiming over 32 MiB", args: upgrade("--chart-source", "$URL"), cluster: true,
			server: claims(chart.DefaultMaxIndexBytes + 1), code: 2, want: []string{"$URL/index.yaml", "larger than the limit of 32 MiB"}},
		{name: "repository archive over 64 MiB", args: upgrade("--chart-source", "$URL"), cluster: true,
			server: repo(repoIndex, repoFiles(endless("\x1f\x8b", chart.MaxArchiveBytes+1<<20))), code: 2,
			want: []string{"$URL/charts/demo-app-2.0.0.tgz", "larger than the limit of 64 MiB"}},
		{name: "repository archive with ..", args: upgrade("--chart-source", "$URL"), cluster: true,
			server: repo(repoIndex, repoFiles(blob(dotdot))), code: 2,
			want: []string{"$URL/charts/demo-app-2.0.0.tgz", `"demo-app/../../escape.yaml"`}},
		{name: "repository archive with an absolute path", args: upgrade("--chart-source", "$URL"), cluster: true,
			server: repo(repoIndex, repoFiles(blob(absolute))), code: 2,
			want: []string{"$URL/charts/demo-app-2.0.0.tgz", `"/etc/cron.d/chart-upgrader-test"`}},
		{name: "repository archive 404", args: upgrade("--chart-source", "$URL"), cluster: true,
			server: repo(repoIndex, repoFiles(status(http.StatusNotFound))), code: 2,
			want: []string{"$URL/charts/demo-app-2.0.0.tgz", "HTTP 404"}},

		// preflight: the same inputs
		{name: "preflight spec live rule with a wildcard", args: []string{"preflight", "--spec", "$DIR/spec.yaml"}, cluster: true,
			files: map[string]string{"spec.yaml": validSpec + "  rules:\n  - path: 'a.*'\n    policy: live\n" +
				"    source: {apiVersion: v1, kind: ConfigMap, namespace: x, name: y}\n    expr: .data.x\n"}, code: 2,
			want: []string{"$DIR/spec.yaml:7", "charts[1].rules[1]"}},
		{name: "preflight target name not a name", args: []string{"preflight", "--target", "managedchart/$NS/Not_A_Name", "--chart-source", "$CHARTS", "--version", "2.0.0"},
			cluster: true, code: 2, want: []string{"--target", `"managedchart/$NS/Not_A_Name"`}},
		{name: "preflight source archive a symlink", args: preflight("--chart-source", "$DIR/charts"), cluster: true,
			blobs: map[string][]byte{"charts/demo-app-2.0.0.tgz": symlink}, code: 2,
			want: []string{`"$DIR/charts/demo-app-2.0.0.tgz"`, "symbolic link"}},
		{name: "preflight source archive decompressing over 256 MiB", args: preflight("--chart-source", "$DIR/charts"), cluster: true,
			blobs: map[string][]byte{"charts/demo-app-2.0.0.tgz": bomb}, code: 2,
			want: []string{`"$DIR/charts/demo-app-2.0.0.tgz"`, "larger than the limit of 256 MiB"}},
		{name: "preflight repository index entry without URL", args: preflight("--chart-source", "$URL"), cluster: true,
			server: repo("apiVersion: v1\nentries:\n  demo-app:\n  - {apiVersion: v2, name: demo-app, version: 2.0.0}\n", nil), code: 2,
			want: []string{"$URL", "the index gives no URL"}},
		{name: "preflight repository index without apiVersion", args: preflight("--chart-source", "$URL"), cluster: true,
			server: repo("entries: {}\n", nil), code: 2, want: []string{"reading repository index $URL/index.yaml"}},
		{name: "preflight -f missing", args: preflight("-f", "$DIR/extra.yaml"), cluster: true, code: 2, want: []string{"-f", "$DIR/extra.yaml"}},
		{name: "preflight --lease-duration not a duration", args: preflight("--lease-duration", "long"), cluster: true, code: 2,
			want: []string{"lease-duration", "long"}},
		// preflight and upgrade: the nodes' registries.yaml and images:
		{name: "registries.yaml missing", args: preflight("--registries-config", "$DIR/nope.yaml"), cluster: true, code: 2,
			want: []string{"--registries-config", "$DIR/nope.yaml", "no such file"}},
		{name: "registries.yaml not YAML", args: preflight("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "mirrors: [\n"}, code: 2, want: []string{"--registries-config", "$DIR/r.yaml", "invalid YAML"}},
		{name: "registries.yaml an unknown key", args: upgrade("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "mirror:\n  docker.io: {}\n"}, code: 2,
			want: []string{"$DIR/r.yaml:1: mirror: unknown field (want one of mirrors, configs, auths)"}},
		{name: "registries.yaml auth.token (not a field of k3s's)", args: preflight("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "configs:\n  r.example.com:\n    auth:\n      token: x\n"}, code: 2,
			want: []string{"$DIR/r.yaml:4: configs[\"r.example.com\"].auth.token: unknown field"}},
		{name: "registries.yaml a rewrite not a regular expression", args: preflight("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "mirrors:\n  docker.io:\n    endpoint: [\"https://m.example.com\"]\n    rewrite:\n      \"^(rancher/.*\": \"x/$1\"\n"}, code: 2,
			want: []string{"$DIR/r.yaml:5", `mirrors["docker.io"].rewrite["^(rancher/.*"]`, "not a regular expression"}},
		{name: "registries.yaml an endpoint not a URL", args: preflight("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "mirrors:\n  docker.io:\n    endpoint: [\"ftp://m.example.com\"]\n"}, code: 2,
			want: []string{"$DIR/r.yaml:3", `mirrors["docker.io"].endpoint[1]`, `scheme "ftp"`}},
		{name: "registries.yaml a ca_file missing", args: preflight("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "configs:\n  m.example.com:\n    tls:\n      ca_file: $DIR/nope.pem\n"}, code: 2,
			want: []string{"$DIR/r.yaml:2", `configs["m.example.com"].tls.ca_file`, "no such file"}},
		{name: "registries.yaml a ca_file with no certificate", args: preflight("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "configs:\n  m.example.com:\n    tls:\n      ca_file: $DIR/ca.pem\n", "ca.pem": "not a certificate\n"}, code: 2,
			want: []string{`configs["m.example.com"].tls.ca_file`, "holds no PEM certificate"}},
		{name: "registries.yaml a cert_file without key_file", args: preflight("--registries-config", "$DIR/r.yaml"), cluster: true,
			files: map[string]string{"r.yaml": "configs:\n  m.example.com:\n    tls:\n      cert_file: $DIR/c.pem\n"}, code: 2,
			want: []string{"$DIR/r.yaml:4", `configs["m.example.com"].tls`, "cert_file and key_file go together"}},
		{name: "pod-failure-grace not a duration", args: upgrade("--pod-failure-grace", "soon"), cluster: true, code: 2,
			want: []string{`--pod-failure-grace "soon": want a positive duration such as 2m or 30s, or 0 (off)`}},
		{name: "settle not a duration", args: upgrade("--settle", "a while"), cluster: true, code: 2,
			want: []string{`--settle "a while": want a positive duration such as 10s or 1m, or 0 (off)`}},
		{name: "settle negative", args: upgrade("--settle", "-5s"), cluster: true, code: 2,
			want: []string{`--settle "-5s": want a positive duration`}},
		{name: "image-manifests an unknown word", args: preflight("--image-manifests", "HEAD"), cluster: true, code: 2,
			want: []string{`--image-manifests "HEAD": want get or head`}},
		{name: "image-timeout zero", args: preflight("--image-timeout", "0s"), cluster: true, code: 2,
			want: []string{"--image-timeout 0s: must be a positive duration"}},
		{name: "spec images.check not a bool", args: []string{"preflight", "--spec", "$DIR/spec.yaml", "--version", "2.0.0"}, cluster: true,
			files: map[string]string{"spec.yaml": chartSpec("  chart: {name: demo-app, source: " + w.charts + "}\n  images: {check: maybe}\n")}, code: 2,
			want: []string{"$DIR/spec.yaml:6", "charts[1].images.check: want true or false"}},
		{name: "spec images.values a path the values do not set", args: []string{"preflight", "--spec", "$DIR/spec.yaml", "--version", "2.0.0"}, cluster: true,
			files: map[string]string{"spec.yaml": chartSpec("  chart: {name: demo-app, source: " + w.charts + "}\n  images:\n    values: [{repository: nope.repository, tag: nope.tag}]\n")}, code: 2,
			want: []string{"$DIR/spec.yaml:7: charts[1].images.values[1].repository: nope.repository is not set in the values the chart renders with"}},

		// status
		{name: "status without target", args: []string{"status"}, cluster: true, code: 2, want: []string{"--target"}},
		{name: "status target with two parts", args: []string{"status", "--target", "managedchart/$MC"}, cluster: true, code: 2,
			want: []string{"--target", `"managedchart/$MC"`}},
		{name: "status -o unknown format", args: []string{"status", "--target", "$TARGET", "-o", "table"}, cluster: true, code: 2,
			want: []string{`status: -o "table": want text, json or yaml`}},
		{name: "status CHART_UPGRADER_OUTPUT unknown format", args: []string{"status", "--target", "$TARGET"}, cluster: true,
			env: map[string]string{"CHART_UPGRADER_OUTPUT": "xml"}, code: 2, want: []string{`"xml"`}},
		{name: "status kubeconfig not a kubeconfig", args: []string{"status", "--target", "$TARGET", "--kubeconfig", "$DIR/kubeconfig"}, cluster: true,
			files: map[string]string{"kubeconfig": "\x00\x01not yaml: ["}, code: 2, want: []string{"--kubeconfig $DIR/kubeconfig"}},

		// drift
		{name: "drift without target", args: []string{"drift"}, cluster: true, code: 2, want: []string{"--target", "want KIND/NAMESPACE/NAME"}},
		{name: "drift of a target that does not exist", args: []string{"drift", "--target", "managedchart/$NS/no-such-chart", "--chart-source", "$CHARTS"},
			cluster: true, code: 2, want: []string{"--target managedchart/$NS/no-such-chart: not found"}},
		{name: "drift of a kind that is not one", args: []string{"drift", "--target", "deployment/$NS/$MC"}, cluster: true, code: 2,
			want: []string{"--target", "deployment"}},
		{name: "drift -o unknown format", args: []string{"drift", "--target", "$TARGET", "--chart-source", "$CHARTS", "-o", "text"}, cluster: true, code: 2,
			want: []string{`drift: -o "text": want table, json or yaml`}},
		{name: "drift chart source that does not exist", args: []string{"drift", "--target", "$TARGET", "--chart-source", "$DIR/nothing"}, cluster: true, code: 2,
			want: []string{"--chart-source", "$DIR/nothing"}},

		// rollback
		{name: "rollback without target", args: []string{"rollback"}, cluster: true, code: 2, want: []string{"--target"}},
		{name: "rollback target bad namespace", args: []string{"rollback", "--target", "managedchart/Bad_NS/$MC"}, cluster: true, code: 2,
			want: []string{"--target", `"managedchart/Bad_NS/$MC"`}},
		{name: "rollback --timeout not a duration", args: []string{"rollback", "--target", "$TARGET", "--timeout", "xyz"}, cluster: true, code: 2,
			want: []string{"xyz", "timeout"}},
		{name: "rollback to a version never backed up", args: []string{"rollback", "--target", "$TARGET", "--version", "0.0.1"}, cluster: true, code: 3,
			want: []string{"nothing to roll back to", "chart-upgrader-backup-managedchart-$MC-0.0.1"}},

		// resolve: flags
		{name: "resolve nothing", args: []string{"resolve"}, code: 2, want: []string{"give a channel URL or a repository"}},
		{name: "resolve channel and repo", args: []string{"resolve", "--channel", "$URL/c", "--repo", "$URL"}, server: status(500), code: 2,
			want: []string{"not both"}},
		{name: "resolve channel of an unsupported scheme", args: []string{"resolve", "--channel", "ftp://channels.example.com/stable"}, code: 2,
			want: []string{`"ftp://channels.example.com/stable"`}},
		{name: "resolve repo without chart", args: []string{"resolve", "--repo", "$URL"}, server: goodRepo, code: 2,
			want: []string{`repository "$URL"`, "no chart name"}},
		{name: "resolve constraint that does not parse", args: []string{"resolve", "--repo", "$URL", "--chart", "demo-app", "--constraint", ">>1"},
			server: goodRepo, code: 2, want: []string{`">>1"`}},
		{name: "resolve constraint nothing satisfies", args: []string{"resolve", "--repo", "$URL", "--chart", "demo-app", "--constraint", ">=9"},
			server: goodRepo, code: 2, want: []string{`">=9"`, "$URL", "available: 2.0.0, 1.0.0"}},
		{name: "resolve repo directory missing", args: []string{"resolve", "--repo", "$DIR/none", "--chart", "demo-app"}, code: 2,
			want: []string{"$DIR/none"}},
		{name: "resolve CA file without a certificate", args: []string{"resolve", "--channel", "$URL/stable", "--ca-file", "$DIR/ca.pem"},
			server: redirect("/r/1.2.3"), files: map[string]string{"ca.pem": "-----BEGIN NOTHING-----\n"}, code: 2,
			want: []string{`"$URL/stable"`, `CA file "$DIR/ca.pem" holds no PEM certificate`}},
		{name: "resolve --timeout not a duration", args: []string{"resolve", "--channel", "$URL/stable", "--timeout", "1 minute"}, code: 2,
			want: []string{"1 minute", "timeout"}},
		// resolve: a channel answering badly
		{name: "resolve channel 404", args: []string{"resolve", "--channel", "$URL/v1/channels/stable"}, server: status(http.StatusNotFound), code: 2,
			want: []string{`"$URL/v1/channels/stable"`, "404"}},
		{name: "resolve channel redirect without Location", args: []string{"resolve", "--channel", "$URL/v1/channels/stable"},
			server: redirectWithoutLocation(), code: 2, want: []string{`"$URL/v1/channels/stable"`, "no Location header"}},
		{name: "resolve channel Location not a version", args: []string{"resolve", "--channel", "$URL/v1/channels/stable"},
			server: redirect("/releases/not%20a%20version"), code: 2, want: []string{`"$URL/v1/channels/stable"`, "not usable"}},
		{name: "resolve channel Location not semver", args: []string{"resolve", "--channel", "$URL/v1/channels/stable", "--require-semver"},
			server: redirect("/releases/latest"), code: 2, want: []string{`"$URL/v1/channels/stable"`, `"latest" is not semver`}},
		{name: "resolve channel 200 on a path ending in /", args: []string{"resolve", "--channel", "$URL/v1/channels/"},
			server: garbage(), code: 2, want: []string{`"$URL/v1/channels/"`, "empty"}},
		// resolve: a repository answering badly
		{name: "resolve repo index garbage", args: []string{"resolve", "--repo", "$URL", "--chart", "demo-app"}, server: garbage(), code: 2,
			want: []string{"reading repository index $URL/index.yaml"}},
		{name: "resolve repo index 404", args: []string{"resolve", "--repo", "$URL", "--chart", "demo-app"}, server: status(http.StatusNotFound), code: 2,
			want: []string{"$URL/index.yaml", "HTTP 404"}},
		{name: "resolve repo index over 32 MiB", args: []string{"resolve", "--repo", "$URL", "--chart", "demo-app"},
			server: endless("apiVersion: v1\nentries: {}\n", chart.DefaultMaxIndexBytes+1<<20), code: 2,
			want: []string{"$URL/index.yaml", "larger than the limit of 32 MiB"}},
		{name: "resolve repo index redirect without Location", args: []string{"resolve", "--repo", "$URL", "--chart", "demo-app"},
			server: redirectWithoutLocation(), code: 2, want: []string{"$URL/index.yaml", "HTTP 302"}},

		// channel serve: the configuration file
		{name: "channel serve without config", args: []string{"channel", "serve", "--listen", "127.0.0.1:0"}, code: 2,
			want: []string{"channel server configuration", "no file given", "give --config FILE"}},
		{name: "channel serve config missing", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"}, code: 2,
			want: []string{"$DIR/channels.yaml"}},
		{name: "channel serve config not YAML", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: $CHARTS\nchannels: [\n"}, code: 2, want: []string{"$DIR/channels.yaml:", "invalid YAML"}},
		{name: "channel serve config unknown field", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": channelCfg + "tls: true\n"}, code: 2, want: []string{"$DIR/channels.yaml:5", "tls", "unknown field"}},
		{name: "channel serve config without channels", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: $CHARTS\nchart: demo-app\n"}, code: 2, want: []string{"$DIR/channels.yaml", `"channels"`}},
		{name: "channel serve config bad constraint", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: $CHARTS\nchart: demo-app\nchannels:\n  stable: \">>1\"\n"}, code: 2,
			want: []string{"$DIR/channels.yaml:4", "channels.stable", `">>1"`}},
		{name: "channel serve config channel name with a slash", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: $CHARTS\nchart: demo-app\nchannels:\n  a/b: \"*\"\n"}, code: 2,
			want: []string{"$DIR/channels.yaml:4", `channels["a/b"]`}},
		{name: "channel serve config constraint written as a number", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: $CHARTS\nchart: demo-app\nchannels:\n  stable: 1.4\n"}, code: 2,
			want: []string{"$DIR/channels.yaml:4", "channels.stable", "want a string, not a number"}},
		{name: "channel serve config second document", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": channelCfg + "---\nttl: 5s\n"}, code: 2,
			want: []string{"$DIR/channels.yaml:5", "a second YAML document"}},
		{name: "channel serve config negative ttl", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": channelCfg + "ttl: -5s\n"}, code: 2, want: []string{"$DIR/channels.yaml:5", "ttl", `"-5s"`}},
		{name: "channel serve config baseURL not http", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": channelCfg + "baseURL: ftp://x.example.com/r\n"}, code: 2,
			want: []string{"$DIR/channels.yaml:5", "baseURL", `"ftp://x.example.com/r"`}},
		{name: "channel serve config source missing", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: ./no-such-dir\nchart: demo-app\nchannels: {stable: '*'}\n"}, code: 2,
			want: []string{"$DIR/channels.yaml", "$DIR/no-such-dir"}},
		{name: "channel serve config source of an unsupported scheme", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: s3://bucket/charts\nchart: demo-app\nchannels: {stable: '*'}\n"}, code: 2,
			want: []string{"$DIR/channels.yaml", `"s3://bucket/charts"`}},
		{name: "channel serve config CA file without a certificate", args: []string{"channel", "serve", "--config", "$DIR/channels.yaml", "--listen", "127.0.0.1:0"},
			files: map[string]string{"channels.yaml": "source: https://charts.example.com\nchart: demo-app\ncaFile: ca.pem\nchannels: {stable: '*'}\n",
				"ca.pem": "nothing\n"}, code: 2,
			want: []string{"$DIR/channels.yaml", `"$DIR/ca.pem"`}},
	}

	// The setup is sound: the same commands with good input succeed, so
	// each row fails on its bad input alone.
	t.Run("control", func(t *testing.T) {
		srv := httptest.NewServer(goodRepo)
		defer srv.Close()
		for _, args := range [][]string{
			merge(),
			preflight(),
			preflight("--chart-source", srv.URL),
			{"resolve", "--repo", srv.URL, "--chart", "demo-app"},
		} {
			r := row{args: args, cluster: args[0] == "preflight"}
			code, stdout, stderr := w.run(t, r, t.TempDir(), srv.URL)
			require.Equal(t, 0, code, "%v\nstdout:\n%s\nstderr:\n%s", args, stdout, stderr)
		}
	})

	byCommand := map[string]int{}
	a := &audit{w: w}
	totalReads := 0
	for _, r := range rows {
		byCommand[r.command()]++
		t.Run(r.command()+"/"+r.name, func(t *testing.T) {
			dir := t.TempDir()
			url := ""
			if r.server != nil {
				srv := httptest.NewServer(r.server)
				defer srv.Close()
				url = srv.URL
			}
			before := w.mark()
			a.start()
			code, stdout, stderr := w.run(t, r, dir, url)
			writes, reads := a.requests()
			totalReads += reads

			t.Logf("exit %d: %s", code, message(stderr))
			assert.Equal(t, r.code, code, "exit code; stdout:\n%s\nstderr:\n%s", stdout, stderr)
			x := w.expander(dir, url)
			for _, want := range r.want {
				assert.Contains(t, stderr, x.Replace(want), "the message names the input")
			}
			assert.Empty(t, writes, "chart-upgrader wrote to the cluster")
			after := w.mark()
			assert.Equal(t, before.Generation, after.Generation, "the ManagedChart's generation changed")
			assert.Equal(t, before.Annotations, after.Annotations, "the ManagedChart's annotations changed")
			assert.Equal(t, before.Version, after.Version)
			assert.Equal(t, before.ValuesHash, after.ValuesHash)
			assert.Equal(t, before.Paused, after.Paused)
		})
	}

	// Nothing chart-upgrader sent during the whole corpus was a write; and
	// the audit log did see it, so the check above is not vacuous.
	a.seen = 0
	writes, reads := a.requests()
	assert.Empty(t, writes, "chart-upgrader wrote to the cluster")
	assert.Positive(t, reads, "the audit log shows no request of chart-upgrader at all")
	assert.Positive(t, totalReads, "no row reached the cluster")

	commands := make([]string, 0, len(byCommand))
	for c := range byCommand {
		commands = append(commands, c)
	}
	sort.Strings(commands)
	var summary []string
	for _, c := range commands {
		summary = append(summary, fmt.Sprintf("%s %d", c, byCommand[c]))
	}
	t.Logf("corpus: %d rows: %s", len(rows), strings.Join(summary, ", "))
	assert.GreaterOrEqual(t, len(rows), 40)
	for _, c := range []string{"merge", "upgrade", "preflight", "status", "rollback", "resolve", "channel serve"} {
		assert.Positive(t, byCommand[c], "no row for %s", c)
	}
}

// expander replaces the row variables.
func (w *world) expander(dir, url string) *strings.Replacer {
	return strings.NewReplacer("$DIR", dir, "$URL", url, "$NS", w.ns, "$MC", w.name,
		"$TARGET", "managedchart/"+w.ns+"/"+w.name, "$CHARTS", w.charts,
		"$EX", filepath.Join(w.root, "package", "examples"))
}

// run writes the row's files into dir and runs chart-upgrader in-process
// with its arguments and environment.
func (w *world) run(t *testing.T, r row, dir, url string) (int, string, string) {
	t.Helper()
	x := w.expander(dir, url)
	for name, body := range r.files {
		writeFile(t, filepath.Join(dir, name), []byte(x.Replace(body)))
	}
	for name, body := range r.blobs {
		writeFile(t, filepath.Join(dir, name), body)
	}
	for name, size := range r.sparse {
		p := filepath.Join(dir, name)
		writeFile(t, p, nil)
		require.NoError(t, os.Truncate(p, size))
	}
	// nothing of the test machine's own configuration leaks in
	t.Setenv("KUBECONFIG", "")
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "xdg-state"))
	for k, v := range r.env {
		t.Setenv(k, x.Replace(v))
	}
	args := []string{"chart-upgrader"}
	for _, a := range r.args {
		args = append(args, x.Replace(a))
	}
	if r.cluster {
		local := filepath.Join(dir, "node")
		if !contains(r.args, "--kubeconfig") {
			args = append(args, "--kubeconfig", w.env.KubeconfigPath())
		}
		args = append(args, "--host-root", filepath.Join(local, "host"), "--state-dir", filepath.Join(local, "state"),
			"--lock-file", filepath.Join(local, "upgrade.lock"), "--termination-log", filepath.Join(local, "termination-log"),
			"--log-format", "json")
		if writesTarget(r.args) {
			args = append(args, "--node-name", "node-1")
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Run(ctx, args, &stdout, &stderr)
	if ctx.Err() != nil {
		t.Errorf("the command did not end by itself within 2m (code %d)", code)
	}
	return code, stdout.String(), stderr.String()
}

// message is the error line Run prints on stderr.
func message(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "chart-upgrader: ") {
			return l
		}
	}
	return "(no error line)"
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writesTarget reports whether the command of args may write a target, and
// so takes the node flags (--node-name) beside the local ones.
func writesTarget(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "upgrade", "preflight", "rollback":
		return true
	}
	return false
}
