package cli_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata from the current output")

// TestMain clears the CHART_UPGRADER_* variables of the caller's
// environment: every flag reads one, and the tests must not depend on them.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "CHART_UPGRADER_") {
			_ = os.Unsetenv(name)
		}
	}
	os.Exit(m.Run())
}

// example holds the paths of the bundled example (package/examples).
type example struct {
	dir, values, oldChart, chart, policy, live string
}

// bundledExample locates the example from the repository root, found by
// walking up from the test's directory to go.mod.
func bundledExample(t *testing.T) example {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "package", "examples")
	return example{
		dir:      dir,
		values:   filepath.Join(dir, "values.yaml"),
		oldChart: filepath.Join(dir, "charts", "demo-app-1.0.0"),
		chart:    filepath.Join(dir, "charts", "demo-app-2.0.0"),
		policy:   filepath.Join(dir, "policy.yaml"),
		live:     filepath.Join(dir, "live.yaml"),
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test directory")
		dir = parent
	}
}

// args is the full offline merge of the example (the `make demo-merge`
// command without -o), followed by extra.
func (ex example) args(extra ...string) []string {
	return append([]string{"merge",
		"--values", ex.values,
		"--old-chart", ex.oldChart,
		"--chart", ex.chart,
		"--policy", ex.policy,
		"--live", ex.live,
	}, extra...)
}

// runOK runs args and requires exit 0, returning both outputs.
func runOK(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := noderun.CLI(t, args...).Outputs()
	require.Equal(t, 0, code, "exit code of %q\nstderr:\n%s", args, stderr)
	return stdout, stderr
}

// writeFile writes content to dir/name (creating parents) and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// parseYAML parses a values document into plain Go values.
func parseYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(s), &m), "parsing:\n%s", s)
	return m
}

// asJSON round-trips v through JSON, so YAML- and JSON-decoded values compare.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

// dig returns the value at a dotted path of m and whether it is set.
func dig(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// liveCerts returns the certificate and key of the example's live Secret,
// base64-decoded, as the once rules should pin them.
func liveCerts(t *testing.T, ex example) (cert, key string) {
	t.Helper()
	f, err := os.Open(ex.live)
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewDecoder(f)
	for {
		var obj struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if obj.Kind != "Secret" {
			continue
		}
		c, err := base64.StdEncoding.DecodeString(obj.Data["tls.crt"])
		require.NoError(t, err)
		k, err := base64.StdEncoding.DecodeString(obj.Data["tls.key"])
		require.NoError(t, err)
		return string(c), string(k)
	}
	t.Fatalf("no Secret in %s", ex.live)
	return "", ""
}

// mergeJSON is the -o json object.
type mergeJSON struct {
	From      string           `json:"from"`
	To        string           `json:"to"`
	Values    map[string]any   `json:"values"`
	SHA256    string           `json:"sha256"`
	Decisions []map[string]any `json:"decisions"`
	Warnings  []struct {
		Kind    string `json:"kind"`
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"warnings"`
}

func parseJSON(t *testing.T, s string) mergeJSON {
	t.Helper()
	var r mergeJSON
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "parsing:\n%s", s)
	return r
}

// decision returns the decision for path, failing when there is none.
func (r mergeJSON) decision(t *testing.T, path string) map[string]any {
	t.Helper()
	for _, d := range r.Decisions {
		if d["path"] == path {
			return d
		}
	}
	t.Fatalf("no decision for %s", path)
	return nil
}

// assertGolden compares got with testdata/name, or rewrites it with -update.
func assertGolden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "run go test ./internal/cli -update to create it")
	require.Equal(t, string(want), got, "output differs from %s (go test ./internal/cli -update rewrites it)", p)
}

// tarChart packs the chart directory dir into dst as `helm package` does
// (every file under <chart name>/) and returns dst.
func tarChart(t *testing.T, dir, name, dst string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: name + "/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	require.NoError(t, os.WriteFile(dst, buf.Bytes(), 0o644))
	return dst
}
