package chart

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeFiles writes files (path relative to root → content) under root.
func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

// chartfile is a minimal Chart.yaml.
func chartfile(name, version string) string {
	return "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n"
}

// tarEntry is one entry of a test archive; typeflag 0 means a regular file.
type tarEntry struct {
	name     string
	body     string
	typeflag byte
	linkname string
}

// makeTgz builds a gzip-compressed tar archive of entries.
func makeTgz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hd := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typeflag, Linkname: e.linkname}
		if hd.Typeflag == 0 {
			hd.Typeflag = tar.TypeReg
		}
		if hd.Typeflag == tar.TypeReg {
			hd.Size = int64(len(e.body))
		}
		if hd.Typeflag == tar.TypeDir {
			hd.Mode = 0o755
		}
		require.NoError(t, tw.WriteHeader(hd))
		if hd.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// packDir archives the chart directory dir the way `helm package` does: every
// file under a top directory named top.
func packDir(t *testing.T, dir, top string) []byte {
	t.Helper()
	var entries []tarEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		entries = append(entries, tarEntry{name: top + "/" + filepath.ToSlash(rel), body: string(body)})
		return nil
	})
	require.NoError(t, err)
	return makeTgz(t, entries...)
}

// writeFile writes data to a new file in a temporary directory.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// appChart writes a chart "app" 1.0.0 with subchart "sub" 0.1.0, itself
// with subchart "deeper" 0.2.0, and returns its directory.
func appChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": chartfile("app", "1.0.0") + `dependencies:
- name: sub
  version: 0.1.x
  condition: sub.enabled
`,
		"values.yaml": `replicas: 1
image:
  repository: example.com/app
  tag: v1.0.0
global:
  region: eu
sub:
  enabled: true
  color: blue
explode: false
`,
		"values.schema.json": `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "replicas": {"type": "integer", "minimum": 1}
  }
}`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
data:
  image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
  upgrade: {{ .Release.IsUpgrade | quote }}
  replicas: {{ .Values.replicas | quote }}
{{- if .Values.explode }}
{{ fail "boom" }}
{{- end }}
{{- if .Values.needName }}
  name: {{ required "name is required" .Values.name }}
{{- end }}
{{- if .Values.badYAML }}
  broken: [unclosed
{{- end }}
`,
		"templates/secret.yaml": `{{- $old := lookup "v1" "Secret" .Release.Namespace "app" }}
apiVersion: v1
kind: Secret
metadata:
  name: app
stringData:
  password: {{ if $old }}{{ index $old.data "password" | b64dec }}{{ else }}{{ randAlphaNum 16 }}{{ end }}
`,
		"templates/NOTES.txt": "Installed {{ .Release.Name }} at {{ now }}.\n",

		"charts/sub/Chart.yaml": chartfile("sub", "0.1.0") + `dependencies:
- name: deeper
  version: 0.2.0
`,
		"charts/sub/values.yaml": `enabled: true
color: red
size: 3
deeper:
  depth: 1
`,
		"charts/sub/values.schema.json": `{
  "type": "object",
  "properties": {
    "color": {"enum": ["red", "green", "blue"]}
  }
}`,
		"charts/sub/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: sub
data:
  color: {{ required "color is required" .Values.color }}
  region: {{ .Values.global.region }}
`,
		"charts/sub/charts/deeper/Chart.yaml": chartfile("deeper", "0.2.0"),
		"charts/sub/charts/deeper/values.yaml": `depth: 2
name: deep
`,
		"charts/sub/charts/deeper/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: deeper-{{ .Values.depth }}
`,
	})
	return dir
}
