package cli_test

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

// secretLines are the lines of a PEM block that carry key material, and
// the block itself in base64, as live.yaml holds it.
func secretLines(pem string) []string {
	var out []string
	for _, l := range strings.Split(pem, "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return append(out, base64.StdEncoding.EncodeToString([]byte(pem)))
}

// The certificate and key pinned from the live Secret are written to the new
// values, and never shown in a report.
func TestMergeSecretsRedacted(t *testing.T) {
	ex := bundledExample(t)
	cert, key := liveCerts(t, ex)

	t.Run("yaml", func(t *testing.T) {
		stdout, stderr := runOK(t, ex.args()...)
		assert.Contains(t, stdout, strings.Split(key, "\n")[1], "the key is pinned in the values")
		for _, s := range append(secretLines(key), secretLines(cert)...) {
			assert.NotContains(t, stderr, s)
		}
		assert.Contains(t, stderr, "<redacted>")
	})

	t.Run("table", func(t *testing.T) {
		stdout, _ := runOK(t, ex.args("-o", "table")...)
		for _, s := range append(secretLines(key), secretLines(cert)...) {
			assert.NotContains(t, stdout, s)
		}
	})

	t.Run("json", func(t *testing.T) {
		stdout, stderr := runOK(t, ex.args("-o", "json")...)
		assert.Empty(t, stderr)
		r := parseJSON(t, stdout)
		v, _ := dig(r.Values, "webhook.certs.key")
		assert.Equal(t, key, v, "the values hold the secret itself")

		for _, path := range []string{"webhook.certs.cert", "webhook.certs.key"} {
			d := r.decision(t, path)
			assert.Equal(t, "once", d["policy"])
			assert.Equal(t, "set", d["action"])
			assert.Equal(t, "<redacted>", d["result"], path)
			assert.Equal(t, "<redacted>", d["old"], path)
			assert.Equal(t, "<redacted>", d["new"], path)
			assert.NotContains(t, d, "user", "the user had no value")
		}
		decisions, err := json.Marshal(r.Decisions)
		require.NoError(t, err)
		warnings, err := json.Marshal(r.Warnings)
		require.NoError(t, err)
		for _, s := range append(secretLines(key), secretLines(cert)...) {
			assert.NotContains(t, string(decisions), s)
			assert.NotContains(t, string(warnings), s)
		}
	})
}

// A secret given explicitly, or rejected by a check, is not shown either:
// not in the decision's reason, not in the error.
func TestMergeSecretsInOverridesAndErrors(t *testing.T) {
	ex := bundledExample(t)
	const secret = "Sup3r-S3cret-Pa55"
	dir := t.TempDir()
	readonlyCerts := writeFile(t, dir, "readonly.yaml", "rules:\n- {path: \"webhook.certs.**\", policy: readonly}\n")
	secretFile := writeFile(t, dir, "secret.yaml", "webhook:\n  certs:\n    key: "+secret+"\n")

	// a chart whose schema restricts a password
	chart := filepath.Join(dir, "auth")
	writeFile(t, chart, "Chart.yaml", "apiVersion: v2\nname: auth\nversion: 0.1.0\n")
	writeFile(t, chart, "values.yaml", "auth:\n  password: changeme\n")
	writeFile(t, chart, "values.schema.json",
		`{"type":"object","properties":{"auth":{"type":"object","properties":{"password":{"type":"string","pattern":"^[a-z]+$"}}}}}`)
	writeFile(t, chart, "templates/secret.yaml",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: auth\nstringData:\n  password: {{ .Values.auth.password | quote }}\n")
	empty := writeFile(t, dir, "empty.yaml", "{}\n")

	tests := []struct {
		name string
		args []string
		code int
	}{
		{"--set, yaml", ex.args("--set", "webhook.certs.key="+secret), 0},
		{"--set, json", ex.args("--set", "webhook.certs.key="+secret, "-o", "json"), 0},
		{"-f, json", ex.args("-f", secretFile, "-o", "json"), 0},
		{"--set refused by readonly",
			[]string{"merge", "--values", ex.values, "--old-chart", ex.oldChart, "--chart", ex.chart,
				"--policy", readonlyCerts, "--set", "webhook.certs.key=" + secret}, 3},
		{"--set refused by the schema",
			[]string{"merge", "--values", empty, "--chart", chart, "--set", "auth.password=" + secret}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := noderun.CLI(t, tt.args...).Outputs()
			require.Equal(t, tt.code, code, "stderr:\n%s", stderr)
			assert.NotContains(t, stderr, secret, "stderr shows the secret")
			if strings.HasPrefix(stdout, "{") {
				r := parseJSON(t, stdout)
				decisions, err := json.Marshal(r.Decisions)
				require.NoError(t, err)
				assert.NotContains(t, string(decisions), secret, "the JSON decisions show the secret")
				assert.Equal(t, "<redacted>", r.decision(t, "webhook.certs.key")["result"])
			}
		})
	}
}
