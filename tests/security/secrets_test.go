package security

import (
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The secrets of the tests: a password in the user values, a key given with
// --set. The PEM blocks of the live webhook Secret are secrets too.
const (
	passwordSecret = "S3cr3t-Value-1234"
	setSecret      = "Set-K3y-Value-98765"
)

// pemSecrets are the lines of a PEM block that carry key material, and the
// whole block in base64 (as a Secret's data holds it).
func pemSecrets(pem string) []string {
	var out []string
	for _, l := range strings.Split(pem, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return append(out, base64.StdEncoding.EncodeToString([]byte(pem)))
}

// assertNoSecret checks that none of secrets is in what was shown.
func assertNoSecret(t *testing.T, where, shown string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(shown, s) {
			i := strings.Index(shown, s)
			from, to := max(0, i-120), min(len(shown), i+len(s)+40)
			t.Errorf("%s shows the secret %q: …%s…", where, s, shown[from:to])
		}
	}
}

// secretPolicy pins the webhook certificate from the live Secret (once).
func secretPolicy(ns string) string {
	return `rules:
- {path: "**.image.tag", policy: follow}
- {path: "**.resources", policy: max}
- {path: "promote.**", policy: readonly}
- path: webhook.certs.cert
  policy: once
  source: {apiVersion: v1, kind: Secret, namespace: ` + ns + `, name: demo-app-webhook-certs}
  expr: '.data["tls.crt"] | @base64d'
migrations:
- {name: drop-kube-vip-config, from: "<2.0.0", to: ">=2.0.0", expr: 'del(.kubeVip.config)'}
`
}

// A real upgrade whose values hold known secrets: a user password, a key
// given with --set, and the certificate pinned from the live Secret (whose
// private key is there too). None of them appears in stdout, the JSON logs,
// the termination message, any Event of the namespace, the journal, or
// status, in either format.
func TestSecretsNeverShownByAnUpgrade(t *testing.T) {
	w := newWorld(t)
	vals := example.UserValues()
	vals["auth"] = map[string]any{"password": passwordSecret}
	name := w.install(vals)
	live, err := w.env.Kube().CoreV1().Secrets(w.ns).Get(t.Context(), "demo-app-webhook-certs", metav1.GetOptions{})
	require.NoError(t, err)
	liveKey, liveCert := string(live.Data["tls.key"]), string(live.Data["tls.crt"])
	require.Contains(t, liveKey, "PRIVATE KEY")
	secrets := append([]string{passwordSecret, setSecret}, pemSecrets(liveKey)...)
	secrets = append(secrets, pemSecrets(liveCert)...) // read from a Secret: redacted in every report

	policy := writeFile(t, filepath.Join(t.TempDir(), "policy.yaml"), secretPolicy(w.ns))
	ref := "managedchart/" + w.ns + "/" + name
	up := w.cli(true, "upgrade", "--target", ref, "--chart-source", w.charts, "--version", "2.0.0",
		"--policy", policy, "--set", "webhook.certs.key="+setSecret, "--timeout", "60s")
	require.Equal(t, 0, up.code, "stderr:\n%s", up.stderr)

	// the secrets did go where they belong: the values, and what Helm deployed
	mc, found, err := w.tc.Get(t.Context(), w.ns, name)
	require.NoError(t, err)
	require.True(t, found)
	specValues, err := json.Marshal(mc.Values)
	require.NoError(t, err)
	for _, s := range []string{passwordSecret, setSecret} {
		require.Contains(t, string(specValues), s, "the upgrade lost a secret value")
	}
	deployed, err := w.env.Kube().CoreV1().Secrets(w.ns).Get(t.Context(), "demo-app-webhook-certs", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, liveCert, string(deployed.Data["tls.crt"]), "once pinned the certificate")
	assert.Equal(t, setSecret, string(deployed.Data["tls.key"]), "--set gave the key")

	assertNoSecret(t, "upgrade stdout (decision table, summary)", up.stdout, secrets)
	assertNoSecret(t, "upgrade stderr (JSON logs)", up.stderr, secrets)
	assert.Contains(t, up.stdout, "<redacted>", "the report shows that it redacted")

	term, err := os.ReadFile(w.node.termLog)
	require.NoError(t, err)
	assert.Contains(t, string(term), "ok: upgraded")
	assertNoSecret(t, "the termination message", string(term), secrets)

	events, err := w.env.Kube().CoreV1().Events(w.ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, events.Items, "the upgrade recorded Events")
	all, err := json.Marshal(events.Items)
	require.NoError(t, err)
	assertNoSecret(t, "the Events of the namespace", string(all), secrets)

	var journal strings.Builder
	require.NoError(t, filepath.WalkDir(w.node.stateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		journal.Write(data)
		return err
	}))
	require.Contains(t, journal.String(), `"toVersion": "2.0.0"`)
	assertNoSecret(t, "the journal", journal.String(), secrets)

	for _, format := range []string{"json", "text"} {
		st := w.cli(true, "status", "--target", ref, "-o", format)
		require.Equal(t, 0, st.code, "status -o %s: %s", format, st.stderr)
		assertNoSecret(t, "status -o "+format, st.stdout+st.stderr, secrets)
	}
}

// A run that refuses or fails on bad input does not show the secrets it
// was given either: not on stderr, not in the termination message.
func TestSecretsNeverShownByARefusal(t *testing.T) {
	w := newWorld(t)
	name := w.install(example.UserValues())
	ref := "managedchart/" + w.ns + "/" + name
	dir := t.TempDir()
	readonly := writeFile(t, filepath.Join(dir, "readonly.yaml"), "rules:\n- {path: \"webhook.certs.**\", policy: readonly}\n")
	tests := []struct {
		name    string
		args    []string
		code    int
		secrets []string
		want    string
	}{
		{"readonly refuses a --set secret", []string{"--policy", readonly, "--set", "webhook.certs.key=" + setSecret}, 3,
			[]string{setSecret}, "webhook.certs.key"},
		{"--set of a password with a comma does not parse", []string{"--set", "auth.password=Pa55-part-one,Pa55-part-two"}, 2,
			[]string{"Pa55-part-one", "Pa55-part-two"}, "--set"},
		{"--set of a key with a bad index does not parse", []string{"--set", "webhook.certs.key[=Pa55-bad-index"}, 2,
			[]string{"Pa55-bad-index"}, "--set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, command := range []string{"preflight", "upgrade"} {
				args := append([]string{command, "--target", ref, "--chart-source", w.charts, "--version", "2.0.0", "--timeout", "60s"}, tt.args...)
				r := w.cli(true, args...)
				require.Equal(t, tt.code, r.code, "%s: stderr:\n%s", command, r.stderr)
				assert.Contains(t, r.stderr, tt.want, "the message names the input")
				assertNoSecret(t, command+" stdout", r.stdout, tt.secrets)
				assertNoSecret(t, command+" stderr", r.stderr, tt.secrets)
				term, err := os.ReadFile(w.node.termLog)
				require.NoError(t, err)
				assert.Contains(t, string(term), "exit ")
				assertNoSecret(t, command+" termination message", string(term), tt.secrets)
				require.NoError(t, os.Remove(w.node.termLog))
			}
		})
	}
	events, err := w.env.Kube().CoreV1().Events(w.ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	all, err := json.Marshal(events.Items)
	require.NoError(t, err)
	assertNoSecret(t, "the Events of the namespace", string(all), []string{setSecret, "Pa55-part-one", "Pa55-part-two", "Pa55-bad-index"})
}

// The offline merge prints the new values, secrets included, as its output;
// its report (the table, the JSON decisions and warnings) never shows them.
func TestMergeReportsHideSecrets(t *testing.T) {
	root, err := os.Getwd()
	require.NoError(t, err)
	ex := filepath.Join(root, "..", "..", "package", "examples")
	liveData, err := os.ReadFile(filepath.Join(ex, "live.yaml"))
	require.NoError(t, err)
	liveKey, liveCert := liveSecretPEM(t, liveData)
	secrets := append([]string{passwordSecret, setSecret}, pemSecrets(liveKey)...)
	secrets = append(secrets, pemSecrets(liveCert)...)

	dir := t.TempDir()
	base, err := os.ReadFile(filepath.Join(ex, "values.yaml"))
	require.NoError(t, err)
	valuesFile := writeFile(t, filepath.Join(dir, "values.yaml"), string(base)+"auth:\n  password: "+passwordSecret+"\n")
	args := func(format string) []string {
		return []string{"merge", "--values", valuesFile, "--old-chart", filepath.Join(ex, "charts", "demo-app-1.0.0"),
			"--chart", filepath.Join(ex, "charts", "demo-app-2.0.0"), "--policy", filepath.Join(ex, "policy.yaml"),
			"--live", filepath.Join(ex, "live.yaml"), "--set", "webhook.certs.key=" + setSecret, "-o", format}
	}
	w := &world{t: t}

	t.Run("yaml", func(t *testing.T) {
		r := w.cli(false, args("yaml")...)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, setSecret, "the values hold the secret: they are the output")
		assert.Contains(t, r.stdout, passwordSecret)
		assert.Contains(t, r.stdout, strings.Split(liveCert, "\n")[1], "the pinned certificate is in the values")
		assertNoSecret(t, "the report on stderr", r.stderr, secrets)
		assert.Contains(t, r.stderr, "<redacted>")
	})
	t.Run("json", func(t *testing.T) {
		r := w.cli(false, args("json")...)
		require.Equal(t, 0, r.code, r.stderr)
		var doc map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
		assert.Contains(t, string(doc["values"]), setSecret, "the values hold the secret")
		for _, part := range []string{"decisions", "warnings", "from", "to", "sha256"} {
			assertNoSecret(t, "JSON "+part, string(doc[part]), secrets)
		}
		assert.Contains(t, string(doc["decisions"]), "<redacted>")
		assertNoSecret(t, "stderr", r.stderr, secrets)
	})
	t.Run("table", func(t *testing.T) {
		r := w.cli(false, args("table")...)
		require.Equal(t, 0, r.code, r.stderr)
		assertNoSecret(t, "the table", r.stdout, secrets)
		assertNoSecret(t, "stderr", r.stderr, secrets)
		for _, path := range []string{"auth.password", "webhook.certs.key", "webhook.certs.cert"} {
			assert.Contains(t, r.stdout, path, "the table has a decision for %s", path)
		}
	})
}

// liveSecretPEM returns the key and certificate of the webhook Secret in a
// live.yaml.
func liveSecretPEM(t *testing.T, live []byte) (key, cert string) {
	t.Helper()
	for _, doc := range strings.Split(string(live), "\n---") {
		var obj struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj.Kind != "Secret" {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(obj.Data["tls.key"])
		require.NoError(t, err)
		c, err := base64.StdEncoding.DecodeString(obj.Data["tls.crt"])
		require.NoError(t, err)
		return string(k), string(c)
	}
	t.Fatal("no Secret in live.yaml")
	return "", ""
}
