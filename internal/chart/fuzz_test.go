package chart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// fuzzLimits keep one fuzz input cheap: a small input cannot decompress
// beyond them (gzip expands at most about 1032 times), so the archive
// loader and Load with its default limits must agree on it.
var fuzzLimits = limits{archive: 1 << 20, content: 16 << 20}

// maxCompared is the largest input also loaded through Load from a file.
const maxCompared = 8 << 10

// fuzzTgz builds a gzip-compressed tar archive of name → body, in name
// order; a body starting with "->" is a symbolic link to the rest.
func fuzzTgz(tb testing.TB, files map[string]string) []byte {
	tb.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		body := files[n]
		hd := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
		if target, ok := strings.CutPrefix(body, "->"); ok {
			hd.Typeflag, hd.Linkname, hd.Size, body = tar.TypeSymlink, target, 0, ""
		}
		if err := tw.WriteHeader(hd); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzLoadArchive feeds bytes to the chart archive loader: it never
// panics; a small input gives the same outcome through Load (from a file,
// with the default limits), whose errors are all bad input; and a chart it
// loads is usable by what a merge does next: its defaults (an error there
// is bad input too) and the scan for regenerated data.
func FuzzLoadArchive(f *testing.F) {
	app := map[string]string{
		"app/Chart.yaml":                "apiVersion: v2\nname: app\nversion: 1.0.0\n",
		"app/values.yaml":               "image: {tag: v1}\nlist: [1, 2]\n",
		"app/templates/cm.yaml":         "kind: ConfigMap\ndata: {tag: {{ .Values.image.tag | quote }}}\n",
		"app/templates/cert.yaml":       "{{ $c := genCA \"x\" 1 }}{{ $c.Cert }}\n",
		"app/values.schema.json":        `{"type":"object","properties":{"image":{"type":"object"}}}`,
		"app/charts/sub/Chart.yaml":     "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"app/charts/sub/values.yaml":    "global: {a: 1}\nx: 2\n",
		"app/templates/NOTES.txt":       "hello\n",
		"app/charts/sub/templates/t.yl": "{{ .Values.x }}",
	}
	f.Add(fuzzTgz(f, app))
	f.Add(fuzzTgz(f, map[string]string{
		"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- {name: sub, version: '0.1.0', alias: s, condition: s.enabled, import-values: [data]}\n",
		"app/charts/sub.tgz": string(fuzzTgz(f, map[string]string{
			"sub/Chart.yaml":  "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
			"sub/values.yaml": "exports: {data: {a: 1}}\n",
		})),
	}))
	f.Add(fuzzTgz(f, map[string]string{
		"app/Chart.yaml":        "apiVersion: v1\nname: app\nversion: 1.0.0\n",
		"app/requirements.yaml": "dependencies:\n- {name: sub, version: '>0.0.0', repository: file://../sub}\n",
		"app/values.yaml":       "a: b\n",
	}))
	f.Add(fuzzTgz(f, map[string]string{"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n", "app/../x": "1"}))
	f.Add(fuzzTgz(f, map[string]string{"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n", "app/templates/l": "->/etc/passwd"}))
	f.Add(fuzzTgz(f, map[string]string{"/abs/Chart.yaml": "name: x\n"}))
	f.Add(fuzzTgz(f, map[string]string{"Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n"}))
	f.Add(fuzzTgz(f, map[string]string{"app/Chart.yaml": "\xef\xbb\xbfapiVersion: v2\nname: app\nversion: x\n", "app/values.yaml": "a: [\n"}))
	whole := fuzzTgz(f, app)
	f.Add(whole[:len(whole)/2])
	f.Add([]byte{})
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"))

	file := filepath.Join(f.TempDir(), "chart.tgz")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := loadArchive(bytes.NewReader(data), fuzzLimits)
		if len(data) <= maxCompared {
			if werr := os.WriteFile(file, data, 0o600); werr != nil {
				t.Fatal(werr)
			}
			_, lerr := Load(file)
			if lerr != nil && !errors.Is(lerr, outcome.ErrBadInput) {
				t.Fatalf("Load: error is not bad input: %v", lerr)
			}
			if (err == nil) != (lerr == nil) {
				t.Fatalf("loadArchive and Load disagree: %v / %v", err, lerr)
			}
		}
		if err != nil {
			return
		}
		if c.Metadata == nil {
			t.Fatal("a chart without metadata")
		}
		if _, err := Defaults(c); err != nil && !errors.Is(err, outcome.ErrBadInput) {
			t.Fatalf("Defaults: error is not bad input: %v", err)
		}
		_ = RegeneratedData(c)
	})
}

// FuzzParseIndex feeds bytes to the repository index parser (what a
// repository answers for index.yaml): it never panics, and an index it
// accepts has an apiVersion and no nil entries, each with metadata,
// versions highest first.
func FuzzParseIndex(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nentries:\n  app:\n  - {name: app, version: 1.0.0, urls: [app-1.0.0.tgz], digest: abc}\n  - {name: app, version: 1.10.0, urls: [a.tgz]}\n",
		"apiVersion: v1\nentries:\n  app:\n  - null\n  - {name: app, version: not-semver}\n  - {name: other, version: 1.0.0}\n",
		`{"apiVersion":"v1","entries":{"app":[{"name":"app","version":"2.0.0","urls":["x"]}]}}`,
		"apiVersion: v1\nentries: {}\nunknown: field\n",
		"entries: {}\n",
		"apiVersion: v1\nentries:\n  app:\n  - {name: app, version: 1.0.0, dependencies: [{name: a}, {name: a}]}\n",
		"",
		"\x00",
		"[1, 2]",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := parseIndex(data, "fuzz/index.yaml")
		if err != nil {
			return
		}
		if idx.APIVersion == "" {
			t.Fatal("an index without apiVersion was accepted")
		}
		for name, entries := range idx.Entries {
			for i, e := range entries {
				if e == nil || e.Metadata == nil {
					t.Fatalf("entry %d of %q is nil or has no metadata", i, name)
				}
			}
		}
		// what a source does with it next
		base, _ := url.Parse("https://charts.example.com/")
		src := &repoSource{base: base, index: idx}
		for name := range idx.Entries {
			if _, err := src.Versions(context.Background(), name); err != nil && !errors.Is(err, outcome.ErrBadInput) {
				t.Fatalf("Versions(%q): error is not bad input: %v", name, err)
			}
			if _, err := Latest(context.Background(), src, name, ">=0.0.0-0", true); err != nil && !errors.Is(err, outcome.ErrBadInput) {
				t.Fatalf("Latest(%q): error is not bad input: %v", name, err)
			}
		}
	})
}

// tarOf is the tar stream inside a gzip-compressed archive.
func tarOf(tb testing.TB, tgz []byte) []byte {
	tb.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(zr); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// gzipped compresses data as a chart archive is.
func gzipped(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzLoadArchiveTar is FuzzLoadArchive one layer down: the fuzzer writes
// the tar stream (headers, names, links, file contents) and the test
// compresses it, so mutations reach the entry checks and Helm's loader
// instead of dying on the gzip checksum.
func FuzzLoadArchiveTar(f *testing.F) {
	for _, files := range []map[string]string{
		{
			"app/Chart.yaml":             "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- {name: sub, version: 0.1.0, alias: s}\n",
			"app/values.yaml":            "s: {x: 1}\nimage: {tag: v1}\n",
			"app/templates/a.yaml":       "{{ if not .Values.x }}{{ randAlphaNum 5 }}{{ end }}{{ lookup \"v1\" \"Secret\" \"\" \"\" }}",
			"app/charts/sub/Chart.yaml":  "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
			"app/charts/sub/values.yaml": "x: 2\nglobal: {g: 1}\n",
		},
		{"app/Chart.yaml": "apiVersion: v1\nname: app\nversion: 1.0.0\n", "app/requirements.yaml": "dependencies:\n- {name: x, version: 1.0.0}\n"},
		{"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n", "app/templates/l": "->../../x"},
		{"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n", "app\\..\\..\\x": "1"},
	} {
		f.Add(tarOf(f, fuzzTgz(f, files)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := loadArchive(bytes.NewReader(gzipped(t, data)), fuzzLimits)
		if err != nil {
			return
		}
		if c.Metadata == nil {
			t.Fatal("a chart without metadata")
		}
		if _, err := Defaults(c); err != nil && !errors.Is(err, outcome.ErrBadInput) {
			t.Fatalf("Defaults: error is not bad input: %v", err)
		}
		_ = RegeneratedData(c)
	})
}

// FuzzChartFiles writes the files of a chart with a subchart from fuzzed
// Chart.yaml, values and template texts, and loads it as an archive: no
// panic in loading, in computing the defaults (an error is bad input) or in
// the scan for regenerated data.
func FuzzChartFiles(f *testing.F) {
	f.Add("apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- {name: sub, version: 0.1.0, alias: s, import-values: [{child: a, parent: b}]}\n",
		"s: {x: 1}\nglobal: {a: 1}\n", "{{ genCA \"x\" 3 }}{{ if (lookup \"v1\" \"S\" \"n\" \"x\") }}{{ end }}",
		"apiVersion: v2\nname: sub\nversion: 0.1.0\n", "a: {b: 1}\nexports: {data: {c: 1}}\n")
	f.Add("apiVersion: v1\nname: app\nversion: 1.0.0\n", "a: [1, {b: 2}]\n", "{{/* c */}}{{ now }}", "name: sub\nversion: x\n", "")
	f.Add("apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- {name: sub, version: '>1', condition: a.b, tags: [t]}\n- {name: sub, alias: sub2}\n",
		"tags: {t: false}\na: {b: true}\n", "{{ define \"x\" }}{{ uuidv4 }}{{ end }}{{ template \"x\" }}", "apiVersion: v2\nname: sub\nversion: 2.0.0\n", "null\n")
	f.Fuzz(func(t *testing.T, chartYAML, values, template, subChartYAML, subValues string) {
		files := map[string]string{
			"app/Chart.yaml": chartYAML, "app/values.yaml": values, "app/templates/t.yaml": template,
			"app/charts/sub/Chart.yaml": subChartYAML, "app/charts/sub/values.yaml": subValues,
		}
		c, err := loadArchive(bytes.NewReader(fuzzTgz(t, files)), fuzzLimits)
		if err != nil {
			return
		}
		if c.Metadata == nil {
			t.Fatal("a chart without metadata")
		}
		if _, err := Defaults(c); err != nil && !errors.Is(err, outcome.ErrBadInput) {
			t.Fatalf("Defaults: error is not bad input: %v", err)
		}
		_ = RegeneratedData(c)
	})
}
