package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// The bundled example, -o yaml: the new values on stdout, the report on
// stderr, and every rule of policy.yaml visible in the values.
func TestMergeExampleYAML(t *testing.T) {
	ex := bundledExample(t)
	stdout, stderr := runOK(t, ex.args()...)

	assertGolden(t, "merge_example.values.golden", stdout)
	got := parseYAML(t, stdout)

	// follow: the pinned tag equals 1.0.0's default, so it is dropped
	_, set := dig(got, "webhook.image.tag")
	assert.False(t, set, "webhook.image.tag must be dropped by the follow rule")
	// live: another StorageClass is the default in live.yaml
	v, set := dig(got, "storageClass.defaultStorageClass")
	assert.True(t, set)
	assert.Equal(t, false, v, "storageClass.defaultStorageClass must come from the live StorageClass")
	// user (no rule): a real customisation is kept
	v, _ = dig(got, "storageClass.replicaCount")
	assert.Equal(t, 2, v)
	// readonly: the install-time values are kept although 2.0.0 changed them
	assert.Equal(t, map[string]any{
		"clusterPodCIDR":     "10.52.0.0/16",
		"clusterServiceCIDR": "10.53.0.0/16",
		"clusterDNS":         "10.53.0.10",
	}, got["promote"])
	// max: 512Mi ≥ 256Mi is kept; 250m < 1 is dropped
	v, _ = dig(got, "resources.requests.memory")
	assert.Equal(t, "512Mi", v)
	_, set = dig(got, "resources.limits.cpu")
	assert.False(t, set, "resources.limits.cpu 250m is below the new default and must be dropped")
	// once: the certificate and key are pinned from the live Secret
	cert, key := liveCerts(t, ex)
	v, _ = dig(got, "webhook.certs.cert")
	assert.Equal(t, cert, v)
	v, _ = dig(got, "webhook.certs.key")
	assert.Equal(t, key, v)
	// the migration removed kubeVip.config, and the emptied map is pruned
	_, set = dig(got, "kubeVip.config")
	assert.False(t, set, "kubeVip.config must be removed by the <2.0.0 migration")
	assert.NotContains(t, got, "kubeVip", "maps the merge leaves empty are pruned")
	// U' is minimal: nothing the decisions do not need
	assert.NotContains(t, got, "image")
	assert.NotContains(t, got, "metrics")

	// the report goes to stderr, and is the -o table output
	assert.True(t, strings.HasPrefix(stderr, "merge 1.0.0 → 2.0.0: "), "stderr starts with the summary:\n%s", stderr)
	assert.Contains(t, stderr, "PATH")
	assert.Contains(t, stderr, "POLICY")
	assert.Contains(t, stderr, "WARNINGS")
	table, _ := runOK(t, ex.args("-o", "table")...)
	assert.Equal(t, table, stderr, "the yaml-mode report must be the table")
}

func TestMergeExampleTable(t *testing.T) {
	ex := bundledExample(t)
	stdout, stderr := runOK(t, ex.args("-o", "table")...)
	assert.Empty(t, stderr)
	assertGolden(t, "merge_example.table.golden", stdout)

	for _, want := range []string{
		"webhook.image.tag", "follow #1", "drop",
		"storageClass.defaultStorageClass", "live #4",
		"promote.clusterDNS", "readonly #3",
		"kubeVip.config.address", "drop-kube-vip-config",
		"regenerated-data", "templates/webhook-certs.yaml",
	} {
		assert.Contains(t, stdout, want)
	}
}

func TestMergeExampleJSON(t *testing.T) {
	ex := bundledExample(t)
	stdout, stderr := runOK(t, ex.args("-o", "json")...)
	assert.Empty(t, stderr)

	// exactly the keys of the contract
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(stdout), &top))
	assert.ElementsMatch(t, []string{"from", "to", "values", "sha256", "decisions", "warnings"}, keys(top))

	r := parseJSON(t, stdout)
	assert.Equal(t, "1.0.0", r.From)
	assert.Equal(t, "2.0.0", r.To)

	// sha256 is the hash of the exact -o yaml stdout, and values is the same
	yamlOut, _ := runOK(t, ex.args()...)
	sum := sha256.Sum256([]byte(yamlOut))
	assert.Equal(t, hex.EncodeToString(sum[:]), r.SHA256)
	assert.Equal(t, asJSON(t, parseYAML(t, yamlOut)), asJSON(t, r.Values))

	// every decision has the required keys; the list is sorted by path
	var paths []string
	for _, d := range r.Decisions {
		for _, k := range []string{"path", "policy", "rule", "action", "reason"} {
			assert.Contains(t, d, k, "decision %v", d)
		}
		paths = append(paths, d["path"].(string))
	}
	assert.True(t, slices.IsSorted(paths), "decisions sorted by path: %q", paths)

	d := r.decision(t, "webhook.image.tag")
	assert.Equal(t, "follow", d["policy"])
	assert.EqualValues(t, 1, d["rule"])
	assert.Equal(t, "drop", d["action"])
	assert.Equal(t, "v0.4.1", d["user"])
	assert.Equal(t, "v0.4.1", d["old"])
	assert.Equal(t, "v0.5.6", d["new"])
	assert.NotContains(t, d, "result", "a dropped value has no result")

	d = r.decision(t, "storageClass.defaultStorageClass")
	assert.Equal(t, "live", d["policy"])
	assert.Equal(t, false, d["result"])
	assert.Equal(t, true, d["user"])

	d = r.decision(t, "storageClass.replicaCount")
	assert.Equal(t, "user", d["policy"])
	assert.EqualValues(t, 0, d["rule"], "no rule matched: the default policy decided")

	d = r.decision(t, "kubeVip.config.address")
	assert.NotContains(t, d, "new", "2.0.0 has no default there")
	assert.NotContains(t, d, "result")
	assert.Contains(t, d["reason"], "drop-kube-vip-config")

	d = r.decision(t, "metrics.enabled")
	assert.NotContains(t, d, "old", "1.0.0 has no default there")
	assert.NotContains(t, d, "user")
	assert.Equal(t, true, d["new"])

	require.Len(t, r.Warnings, 1)
	assert.Equal(t, "regenerated-data", r.Warnings[0].Kind)
	assert.Equal(t, "templates/webhook-certs.yaml", r.Warnings[0].Path)
}

// A YAML null is reported as null, an unset value not at all.
func TestMergeJSONNull(t *testing.T) {
	ex := bundledExample(t)
	dir := t.TempDir()
	nulls := writeFile(t, dir, "nulls.yaml", "metrics:\n  enabled: null\n")
	stdout, _ := runOK(t, "merge", "--values", nulls, "--chart", ex.chart, "--old-chart", ex.oldChart, "-o", "json")
	r := parseJSON(t, stdout)
	d := r.decision(t, "metrics.enabled")
	require.Contains(t, d, "user")
	assert.Nil(t, d["user"], "a YAML null is JSON null")
	assert.NotContains(t, d, "old", "1.0.0 has no metrics default")
}

// Same inputs, byte-identical outputs, in every format.
func TestMergeDeterministic(t *testing.T) {
	ex := bundledExample(t)
	for _, format := range []string{"yaml", "json", "table"} {
		t.Run(format, func(t *testing.T) {
			out1, err1 := runOK(t, ex.args("-o", format)...)
			out2, err2 := runOK(t, ex.args("-o", format)...)
			assert.Equal(t, out1, out2)
			assert.Equal(t, err1, err2)
		})
	}
}

// A .tgz chart gives the same result as its directory.
func TestMergeChartArchive(t *testing.T) {
	ex := bundledExample(t)
	dir := t.TempDir()
	newTgz := tarChart(t, ex.chart, "demo-app", filepath.Join(dir, "demo-app-2.0.0.tgz"))
	oldTgz := tarChart(t, ex.oldChart, "demo-app", filepath.Join(dir, "demo-app-1.0.0.tgz"))

	want, _ := runOK(t, ex.args("-o", "json")...)
	got, _ := runOK(t, "merge", "--values", ex.values, "--old-chart", oldTgz, "--chart", newTgz,
		"--policy", ex.policy, "--live", ex.live, "-o", "json")
	assert.JSONEq(t, want, got)
}

// Every flag also reads CHART_UPGRADER_<FLAG>; slice flags split the
// variable on newlines; a flag on the command line wins over its variable.
func TestMergeEnv(t *testing.T) {
	ex := bundledExample(t)
	dir := t.TempDir()
	f1 := writeFile(t, dir, "one.yaml", "storageClass:\n  replicaCount: 4\n")
	f2 := writeFile(t, dir, "two.yaml", "metrics:\n  enabled: false\n")

	t.Run("every flag", func(t *testing.T) {
		wantOut, wantErr := runOK(t, ex.args("-o", "json",
			"--set", "image.tag=v9,storageClass.replicaCount=5", "--set", "webhook.image.tag=v0.6.0",
			"-f", f1, "-f", f2, "--from-version", "2.0.0", "--to-version", "2.1.0")...)

		t.Setenv("CHART_UPGRADER_VALUES", ex.values)
		t.Setenv("CHART_UPGRADER_CHART", ex.chart)
		t.Setenv("CHART_UPGRADER_OLD_CHART", ex.oldChart)
		t.Setenv("CHART_UPGRADER_POLICY", ex.policy)
		t.Setenv("CHART_UPGRADER_LIVE", ex.live)
		t.Setenv("CHART_UPGRADER_OUTPUT", "json")
		t.Setenv("CHART_UPGRADER_SET", "image.tag=v9,storageClass.replicaCount=5\nwebhook.image.tag=v0.6.0")
		t.Setenv("CHART_UPGRADER_FILE", f1+"\n"+f2)
		t.Setenv("CHART_UPGRADER_FROM_VERSION", "2.0.0")
		t.Setenv("CHART_UPGRADER_TO_VERSION", "2.1.0")
		gotOut, gotErr := runOK(t, "merge")
		assert.Equal(t, wantOut, gotOut)
		assert.Equal(t, wantErr, gotErr)

		r := parseJSON(t, gotOut)
		assert.Equal(t, "2.0.0", r.From)
		assert.Equal(t, "2.1.0", r.To)
		for path, want := range map[string]any{
			"image.tag":                 "v9",
			"storageClass.replicaCount": 5.0,
			"webhook.image.tag":         "v0.6.0",
			"metrics.enabled":           false,
			"kubeVip.config.address":    "192.168.1.10", // --from-version 2.0.0: no migration
		} {
			v, _ := dig(r.Values, path)
			assert.Equal(t, want, v, path)
		}
	})

	t.Run("flag wins over variable", func(t *testing.T) {
		want, _ := runOK(t, ex.args()...)
		t.Setenv("CHART_UPGRADER_OUTPUT", "json")
		t.Setenv("CHART_UPGRADER_VALUES", filepath.Join(dir, "missing.yaml"))
		got, _ := runOK(t, ex.args("-o", "yaml")...)
		assert.Equal(t, want, got)
	})
}

// --set and -f apply after the rules, -f files in order, then --set in
// order, whatever the order of the flags on the command line.
func TestMergeOverrides(t *testing.T) {
	ex := bundledExample(t)
	dir := t.TempDir()
	f1 := writeFile(t, dir, "one.yaml", "webhook:\n  image:\n    tag: v0.9.0\nstorageClass:\n  replicaCount: 4\n")
	f2 := writeFile(t, dir, "two.yaml", "storageClass:\n  replicaCount: 5\n")

	tests := []struct {
		name   string
		extra  []string
		want   map[string]any // path → value in U'
		action map[string]string
	}{
		{
			name:   "--set beats follow",
			extra:  []string{"--set", "webhook.image.tag=v0.4.1"},
			want:   map[string]any{"webhook.image.tag": "v0.4.1"},
			action: map[string]string{"webhook.image.tag": "override"},
		},
		{
			name:   "--set beats live",
			extra:  []string{"--set", "storageClass.defaultStorageClass=true"},
			want:   map[string]any{"storageClass.defaultStorageClass": true},
			action: map[string]string{"storageClass.defaultStorageClass": "override"},
		},
		{
			name:   "-f beats follow",
			extra:  []string{"-f", f1},
			want:   map[string]any{"webhook.image.tag": "v0.9.0", "storageClass.replicaCount": 4.0},
			action: map[string]string{"webhook.image.tag": "override"},
		},
		{
			name:  "later -f wins",
			extra: []string{"-f", f1, "-f", f2},
			want:  map[string]any{"webhook.image.tag": "v0.9.0", "storageClass.replicaCount": 5.0},
		},
		{
			name:  "later --file wins",
			extra: []string{"--file", f1, "--file", f2},
			want:  map[string]any{"webhook.image.tag": "v0.9.0", "storageClass.replicaCount": 5.0},
		},
		{
			// Helm accepts -f and --values together; so must the two forms here
			name:  "-f and --file mixed",
			extra: []string{"-f", f1, "--file", f2},
			want:  map[string]any{"webhook.image.tag": "v0.9.0", "storageClass.replicaCount": 5.0},
		},
		{
			name:  "--set after -f whatever the flag order",
			extra: []string{"--set", "webhook.image.tag=v1.0.0", "-f", f1},
			want:  map[string]any{"webhook.image.tag": "v1.0.0", "storageClass.replicaCount": 4.0},
		},
		{
			name:  "later --set wins",
			extra: []string{"--set", "storageClass.replicaCount=4", "--set", "storageClass.replicaCount=1"},
			want:  map[string]any{"storageClass.replicaCount": 1.0},
		},
		{
			name:  "one --set with commas",
			extra: []string{"--set", "storageClass.replicaCount=4,metrics.enabled=false"},
			want:  map[string]any{"storageClass.replicaCount": 4.0, "metrics.enabled": false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _ := runOK(t, ex.args(append(tt.extra, "-o", "json")...)...)
			r := parseJSON(t, stdout)
			for path, want := range tt.want {
				v, set := dig(r.Values, path)
				assert.True(t, set, "%s must be set", path)
				assert.Equal(t, want, v, path)
			}
			for path, want := range tt.action {
				d := r.decision(t, path)
				assert.Equal(t, want, d["action"], path)
				assert.Contains(t, d["reason"], "explicit", path)
			}
			// the other rules still ran
			v, _ := dig(r.Values, "webhook.certs.key")
			assert.NotEmpty(t, v, "the once rule still pins the key")
		})
	}
}

// The versions choose the migrations: drop-kube-vip-config runs from <2.0.0
// to >=2.0.0 only.
func TestMergeVersions(t *testing.T) {
	ex := bundledExample(t)
	tests := []struct {
		name     string
		args     []string
		from, to string
		migrated bool
	}{
		{"chart versions", ex.args(), "1.0.0", "2.0.0", true},
		{"--from-version 2.0.0 skips <2.0.0", ex.args("--from-version", "2.0.0"), "2.0.0", "2.0.0", false},
		{"--to-version 1.9.0 skips >=2.0.0", ex.args("--to-version", "1.9.0"), "1.0.0", "1.9.0", false},
		{"both flags in range", ex.args("--from-version", "1.5.0", "--to-version", "2.1.0"), "1.5.0", "2.1.0", true},
		{"no old chart, no from version",
			[]string{"merge", "--values", ex.values, "--chart", ex.chart, "--policy", ex.policy, "--live", ex.live},
			"", "2.0.0", false},
		{"no old chart, --from-version",
			[]string{"merge", "--values", ex.values, "--chart", ex.chart, "--policy", ex.policy, "--live", ex.live, "--from-version", "1.0.0"},
			"1.0.0", "2.0.0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _ := runOK(t, append(tt.args, "-o", "json")...)
			r := parseJSON(t, stdout)
			assert.Equal(t, tt.from, r.From)
			assert.Equal(t, tt.to, r.To)
			v, set := dig(r.Values, "kubeVip.config.address")
			if tt.migrated {
				assert.False(t, set, "the migration must remove kubeVip.config")
			} else {
				assert.True(t, set, "the migration must not run")
				assert.Equal(t, "192.168.1.10", v)
			}
			d := r.decision(t, "kubeVip.config.address")
			if tt.migrated {
				assert.Contains(t, d["reason"], "drop-kube-vip-config")
			} else {
				assert.NotContains(t, d["reason"], "drop-kube-vip-config")
			}
		})
	}
}

// merge --help documents every flag and its environment variable.
func TestMergeHelp(t *testing.T) {
	for _, args := range [][]string{{"merge", "--help"}, {"merge", "-h"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, _ := noderun.CLI(t, args...).Outputs()
			assert.Equal(t, 0, code)
			for _, flag := range []string{
				"--values", "--chart", "--old-chart", "--policy", "--live", "--set",
				"--file", "-f", "--from-version", "--to-version", "--output", "-o",
			} {
				assert.Contains(t, stdout, flag+" ", "help names %s", flag)
			}
			for _, env := range []string{
				"CHART_UPGRADER_VALUES", "CHART_UPGRADER_CHART", "CHART_UPGRADER_OLD_CHART",
				"CHART_UPGRADER_POLICY", "CHART_UPGRADER_LIVE", "CHART_UPGRADER_SET",
				"CHART_UPGRADER_FILE", "CHART_UPGRADER_FROM_VERSION", "CHART_UPGRADER_TO_VERSION",
				"CHART_UPGRADER_OUTPUT",
			} {
				assert.Contains(t, stdout, env)
			}
			assert.Contains(t, stdout, "yaml, json or table")
		})
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// An adopt rule on a path the new chart has no value at is a warning,
// not a failure; offline, with no cluster to read drift from, every adopt
// rule decides as user, and says so.
func TestMergeWithAdoptRulesOffline(t *testing.T) {
	ex := bundledExample(t)
	policy := writeFile(t, t.TempDir(), "adopt.yaml", "rules:\n- {path: nothing.here, policy: adopt}\n- {path: \"**.image.tag\", policy: adopt}\n")
	args := ex.args()
	for i := range args {
		if args[i] == "--policy" {
			args[i+1] = policy
		}
	}
	stdout, _ := runOK(t, append(args, "-o", "json")...)
	res := parseYAML(t, stdout)
	var warnings []string
	for _, w := range res["warnings"].([]any) {
		m := w.(map[string]any)
		warnings = append(warnings, m["kind"].(string)+" "+m["path"].(string)+": "+m["message"].(string))
	}
	assert.Contains(t, warnings, "adopt nothing.here: rule 1 (adopt) matches no value of the new chart: nothing is adopted there")
	assert.Contains(t, warnings, "adopt **.image.tag: an offline merge has no cluster to read drift from: the adopt rule decides as user (merge --target adopts)")
}
