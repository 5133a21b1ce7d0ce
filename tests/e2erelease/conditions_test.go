package e2erelease

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/tests/hotfix"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// gatewayTemplate has the shapes of public charts whose hotfixes only a
// value a condition tests renders (issue 56): ingress-nginx's image
// (`@digest` under `if .digest`, a digest in the defaults), flags a
// switch adds and args ranged out of a map, a Service port under `if
// .Values.gw.metrics.enabled`, a ConfigMap key from toYaml of a map, and
// bitnami's Secret key from b64enc of a password with a random default.
const gatewayTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-gw
spec:
  selector: {matchLabels: {app: {{ .Release.Name }}-gw}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}-gw}}
    spec:
      containers:
      - name: controller
        image: "{{ .Values.gw.image.registry }}/{{ .Values.gw.image.image }}:{{ .Values.gw.image.tag | default .Chart.AppVersion }}{{- if .Values.gw.image.digest }}@{{ .Values.gw.image.digest }}{{- end }}"
        args:
        - /gateway
        - --election-id={{ .Values.gw.electionID }}
        {{- if .Values.gw.metrics.enabled }}
        - --metrics-port={{ .Values.gw.metrics.port }}
        {{- end }}
      - name: agent
        image: registry.example/gateway/agent:1.0
        args:
        - /agent
        {{- range $key, $value := .Values.gw.extraArgs }}
        - --{{ $key }}={{ $value }}
        {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-gw
spec:
  selector: {app: {{ .Release.Name }}-gw}
  ports:
  - name: http
    port: 80
    targetPort: 8080
  {{- if .Values.gw.metrics.enabled }}
  - name: metrics
    port: {{ .Values.gw.metrics.port }}
    targetPort: {{ .Values.gw.metrics.port }}
  {{- end }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-gw-config
data:
  config.yaml: |
    {{- toYaml .Values.gw.config | nindent 4 }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-gw-auth
data:
  {{- if .Values.gw.auth.password }}
  password: {{ .Values.gw.auth.password | b64enc | quote }}
  {{- else }}
  password: {{ randAlphaNum 16 | b64enc | quote }}
  {{- end }}
`

const (
	gwDigest   = "sha256:3c3f0a7b1e0b5f2d9a4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3"
	gwHotImage = "registry.example/gateway/controller:1.12.1"
	gwPassword = "Pa55-gw-hotfix"
)

// An operator's hotfixes that only the other branch of a condition
// renders, made with the real kubectl on a release Helm 4 installed
// server-side: an image set to a tag without the default's digest, a
// Service port added, an argument added, a key added to a ConfigMap's
// YAML, a Secret's random password set. drift, as the release Plan's
// ServiceAccount, traces each to the values that render it (the digest
// emptied and the tag, the metrics switch, the args map, the config map
// read back as YAML, the password), never shows the password (not even
// base64), and offers it as --set-file from the live Secret; preflight's
// conflict lines name the adopt rules; an upgrade with those rules keeps
// every hotfix, and drift then lists nothing.
func TestDriftTracesHotfixesThroughConditions(t *testing.T) {
	f := newFixture(t, "")
	for _, v := range []string{"1.0.0", "2.0.0"} {
		require.NoError(t, writeTemplate(f.charts, v, "gateway.yaml", gatewayTemplate))
		f.addValues(v, map[string]any{"gw": map[string]any{
			"image":      map[string]any{"registry": "registry.example", "image": "gateway/controller", "tag": "1.12.0", "digest": gwDigest},
			"electionID": "gw-leader",
			"metrics":    map[string]any{"enabled": false, "port": 10254},
			"extraArgs":  map[string]any{},
			"config":     map[string]any{"keep-alive": "75", "worker-processes": "4"},
			"auth":       map[string]any{"password": ""},
		}})
	}
	name := releaseName()
	sucNS, sa, _ := f.releasePlanRBAC(name,
		"resources: [secrets, configmaps]", "resources: [secrets, configmaps, services]",
		"- apiGroups: [coordination.k8s.io]",
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [coordination.k8s.io]")
	f.install(name)
	kubeconfig := rbaccheck.Impersonating(t, f.env, sa, sucNS)
	node := newNode(t, "node-1")
	cli := func(command string, args ...string) result {
		t.Helper()
		return f.cli(node, command, append(args, "--kubeconfig", kubeconfig)...)
	}
	drift := func() app.DriftOutput {
		t.Helper()
		r := cli("drift", "--target", f.target(name), "--chart-source", f.charts, "-o", "json")
		r.RequireCode(t, 0)
		var out app.DriftOutput
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
		return out
	}
	assert.Empty(t, drift().Fields, "the untouched release (its random password is what the deployed revision rendered)")

	ctx := t.Context()
	for _, args := range [][]string{
		{"set", "image", "deployment/" + name + "-gw", "controller=" + gwHotImage},
		{"patch", "service", name + "-gw", "--type=json", "-p", `[{"op":"add","path":"/spec/ports/-","value":{"name":"metrics","port":10254,"targetPort":10254}}]`},
		{"patch", "deployment", name + "-gw", "--type=json", "-p", `[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--metrics-port=10254"},` +
			`{"op":"add","path":"/spec/template/spec/containers/1/args/-","value":"--enable-ssl-passthrough=true"}]`},
		{"patch", "configmap", name + "-gw-config", "-p", `{"data":{"config.yaml":"keep-alive: \"75\"\nssl-protocols: TLSv1.3\nworker-processes: \"4\"\n"}}`},
		{"patch", "secret", name + "-gw-auth", "-p", `{"stringData":{"password":"` + gwPassword + `"}}`},
	} {
		_, err := f.env.Kubectl(ctx, append([]string{"-n", f.ns}, args...)...)
		require.NoError(t, err, args)
	}

	r := cli("drift", "--target", f.target(name), "--chart-source", f.charts)
	r.RequireCode(t, 0)
	for _, leak := range []string{gwPassword, base64.StdEncoding.EncodeToString([]byte(gwPassword))} {
		assert.NotContains(t, r.Stdout+r.Stderr, leak, "the password, in the table")
	}
	out := drift()
	raw, err := json.Marshal(out)
	require.NoError(t, err)
	for _, leak := range []string{gwPassword, base64.StdEncoding.EncodeToString([]byte(gwPassword))} {
		assert.NotContains(t, string(raw), leak, "the password, in JSON")
	}
	rows := map[string]upgrade.DriftField{}
	for _, d := range out.Fields {
		rows[d.Object+" "+d.Field] = d
	}
	row := func(object, field string) upgrade.DriftField {
		t.Helper()
		d, ok := rows[object+" "+field]
		require.True(t, ok, "no row %s %s in %v", object, field, slices.Sorted(maps.Keys(rows)))
		assert.True(t, d.Reading.Mapped(), "%s %s: %s", object, field, d.Reading.Reason)
		return d
	}
	dep, svc := "Deployment "+f.ns+"/"+name+"-gw", "Service "+f.ns+"/"+name+"-gw"
	image := row(dep, `.spec.template.spec.containers[name="controller"].image`)
	assert.ElementsMatch(t, []string{"{path: gw.image.tag, policy: adopt}", "{path: gw.image.digest, policy: adopt}"}, image.Reading.Rules)
	assert.Contains(t, image.Reading.Set, `--set-string gw.image.digest=`)
	ports := row(svc, ".spec.ports")
	assert.Equal(t, []string{"kubectl-patch (Update)"}, ports.Managers)
	assert.Equal(t, []string{"{path: gw.metrics.enabled, policy: adopt}"}, ports.Reading.Rules)
	assert.Equal(t, []string{"--set gw.metrics.enabled=true"}, ports.Reading.Set)
	assert.Equal(t, provenance.ConditionNote, ports.Reading.Note)
	assert.Contains(t, strings.Join(ports.Reading.AlsoChanges, " "), "args", "the switch adds a flag too")
	flags := row(dep, `.spec.template.spec.containers[name="controller"].args`)
	assert.Equal(t, []string{"--set gw.metrics.enabled=true"}, flags.Reading.Set, "the flag the operator added is the switch's")
	args := row(dep, `.spec.template.spec.containers[name="agent"].args`)
	assert.Equal(t, []string{`--set-json gw.extraArgs={"enable-ssl-passthrough":"true"}`}, args.Reading.Set)
	config := row("ConfigMap "+f.ns+"/"+name+"-gw-config", ".data.config.yaml")
	assert.Equal(t, []string{"{path: gw.config, policy: adopt}"}, config.Reading.Rules)
	assert.Contains(t, config.Reading.Set[0], `"ssl-protocols":"TLSv1.3"`)
	password := row("Secret "+f.ns+"/"+name+"-gw-auth", ".data.password")
	assert.True(t, password.Secret)
	assert.Equal(t, []string{"{path: gw.auth.password, policy: adopt}"}, password.Reading.Rules)
	assert.Equal(t, []string{"--set-file gw.auth.password=<(kubectl get secret -n " + f.ns + " " + name + "-gw-auth -o jsonpath='{.data.password}' | base64 -d)"}, password.Reading.Set)

	// preflight's conflict lines name the same rules
	r = cli("preflight", f.upgradeArgs(name, "2.0.0")...)
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{"{path: gw.image.digest, policy: adopt}", "{path: gw.extraArgs, policy: adopt}", "{path: gw.config, policy: adopt}", "{path: gw.auth.password, policy: adopt}"} {
		assert.Contains(t, r.Stderr, want)
	}
	assert.NotContains(t, r.Stdout+r.Stderr, gwPassword)

	policy := hotfix.WithRules(t, f.policy(name), strings.Join([]string{
		"- {path: gw.image.tag, policy: adopt}", "- {path: gw.image.digest, policy: adopt}", "- {path: gw.metrics.enabled, policy: adopt}",
		"- {path: gw.extraArgs, policy: adopt}", "- {path: gw.config, policy: adopt}", "- {path: gw.auth.password, policy: adopt}", ""}, "\n"))
	r = cli("upgrade", "--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0", "--policy", policy, "--timeout", "60s")
	r.RequireCode(t, 0)
	assert.NotContains(t, r.Stdout+r.Stderr, gwPassword)
	kube := f.env.Kube()
	d, err := kube.AppsV1().Deployments(f.ns).Get(ctx, name+"-gw", metav1.GetOptions{})
	require.NoError(t, err)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, gwHotImage, c.Image, "the tag without the digest is kept")
	assert.Equal(t, []string{"/gateway", "--election-id=gw-leader", "--metrics-port=10254"}, c.Args)
	assert.Equal(t, []string{"/agent", "--enable-ssl-passthrough=true"}, d.Spec.Template.Spec.Containers[1].Args)
	s, err := kube.CoreV1().Services(f.ns).Get(ctx, name+"-gw", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, s.Spec.Ports, 2)
	assert.Equal(t, int32(10254), s.Spec.Ports[1].Port)
	cm, err := kube.CoreV1().ConfigMaps(f.ns).Get(ctx, name+"-gw-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, cm.Data["config.yaml"], "ssl-protocols: TLSv1.3")
	sec, err := kube.CoreV1().Secrets(f.ns).Get(ctx, name+"-gw-auth", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, gwPassword, string(sec.Data["password"]), "the password is kept")
	for _, d := range drift().Fields {
		assert.False(t, d.Differs, "after the upgrade nothing differs: %s %s", d.Object, d.Field)
	}
	_, denied := rbaccheck.Requests(t, f.env, sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", sa)
}
