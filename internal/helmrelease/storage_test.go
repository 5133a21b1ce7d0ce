package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	helmstatus "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
)

func sampleRelease() *release.Release {
	return &release.Release{
		Name: "web", Namespace: "apps", Version: 3,
		Info:     &release.Info{Status: helmstatus.StatusDeployed, Description: "Upgrade complete"},
		Chart:    &chart.Chart{Metadata: &chart.Metadata{Name: "demo-app", Version: "2.0.0", APIVersion: "v2"}},
		Config:   map[string]any{"replicas": float64(2)},
		Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n",
	}
}

func encodeJSON(t *testing.T, rel *release.Release) []byte {
	t.Helper()
	b, err := json.Marshal(rel)
	require.NoError(t, err)
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	_, err = w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func assertSameRelease(t *testing.T, want, got *release.Release) {
	t.Helper()
	assert.Equal(t, want.Name, got.Name)
	assert.Equal(t, want.Namespace, got.Namespace)
	assert.Equal(t, want.Version, got.Version)
	assert.Equal(t, want.Manifest, got.Manifest)
	assert.Equal(t, want.Config, got.Config)
	require.NotNil(t, got.Info)
	assert.Equal(t, want.Info.Status, got.Info.Status)
	require.NotNil(t, got.Chart)
	assert.Equal(t, "demo-app", got.Chart.Name())
	assert.Equal(t, "2.0.0", got.Chart.Metadata.Version)
}

func TestDecodeGzippedRecord(t *testing.T) {
	// what Helm's storage drivers write: base64 of gzipped JSON
	rel := sampleRelease()
	got, err := Decode(base64.StdEncoding.EncodeToString(gzipped(t, encodeJSON(t, rel))))
	require.NoError(t, err)
	assertSameRelease(t, rel, got)
}

func TestDecodePlainJSONRecord(t *testing.T) {
	// records of old Helm versions are not compressed
	rel := sampleRelease()
	got, err := Decode(base64.StdEncoding.EncodeToString(encodeJSON(t, rel)))
	require.NoError(t, err)
	assertSameRelease(t, rel, got)
}

func TestDecodeRejectsBadRecords(t *testing.T) {
	good := gzipped(t, encodeJSON(t, sampleRelease()))
	truncated := append([]byte(nil), good[:len(good)/2]...)
	for name, data := range map[string]string{
		"not base64":            "%%% not base64 %%%",
		"raw JSON":              string(encodeJSON(t, sampleRelease())), // not base64-encoded
		"truncated gzip":        base64.StdEncoding.EncodeToString(truncated),
		"gzip magic, no stream": base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 0x08, 0x00}),
		"not JSON":              base64.StdEncoding.EncodeToString([]byte("name: web")),
		"gzipped junk":          base64.StdEncoding.EncodeToString(gzipped(t, []byte("{\"name\": "))),
	} {
		t.Run(name, func(t *testing.T) {
			rel, err := Decode(data)
			assert.Error(t, err)
			assert.Nil(t, rel)
		})
	}
}
