package e2erelease

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// preflight -o diff prints, per object, the change the apply makes: live
// → after, from the same computed server-side apply as the conflict check
// (an operator's field the chart does not set stays; the chart's change
// shows; a new object is all additions; an object the new chart drops is
// deleted), a Secret's values redacted; -o json carries the same changes;
// nothing is written.
func TestPreflightShowsTheChange(t *testing.T) {
	f := newFixture(t, "")
	name := releaseName()
	require.NoError(t, writeTemplate(f.charts, "1.0.0", "dropped.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-dropped\ndata: {a: b}\n"))
	require.NoError(t, writeTemplate(f.charts, "1.0.0", "token.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-token\nstringData: {token: hunter2, same: kept-secret}\n"))
	require.NoError(t, writeTemplate(f.charts, "2.0.0", "token.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-token\nstringData: {token: hunter3, same: kept-secret}\n"))
	require.NoError(t, writeTemplate(f.charts, "2.0.0", "added.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-added\ndata: {fresh: value}\n"))
	deployment := filepath.Join(f.charts, "demo-app-2.0.0", "templates", "deployment.yaml")
	data, err := os.ReadFile(deployment)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(deployment, []byte(strings.Replace(string(data), `default "registry.example/web:1"`, `default "registry.example/web:2"`, 1)), 0o644))
	f.install(name)
	// an operator's annotation, a field the chart does not set
	_, err = f.env.Kube().AppsV1().Deployments(f.ns).Patch(t.Context(), name+"-web", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"ops.example/owner":"team-a"}}}`), metav1.PatchOptions{FieldManager: "kubectl-annotate"})
	require.NoError(t, err)
	before := len(f.writesBy())
	n := newNode(t, "node-1")

	r := f.cli(n, "preflight", f.upgradeArgs(name, "2.0.0", "-o", "diff")...)
	r.RequireCode(t, 0)
	web := "Deployment " + f.ns + "/" + name + "-web"
	assert.Contains(t, r.Stdout, web+": update\n--- "+web+" (live)\n+++ "+web+" (after the upgrade)\n")
	assert.Contains(t, r.Stdout, "-      - image: registry.example/web:1\n+      - image: registry.example/web:2\n")
	assert.NotContains(t, r.Stdout, "ops.example/owner", "the operator's annotation, a field the chart does not set, stays")
	assert.Contains(t, r.Stdout, "ConfigMap "+f.ns+"/"+name+"-added: create\n")
	assert.Contains(t, r.Stdout, "+  fresh: value\n")
	assert.Contains(t, r.Stdout, "ConfigMap "+f.ns+"/"+name+"-dropped: delete\n")
	assert.Contains(t, r.Stdout, "Secret "+f.ns+"/"+name+"-token: update\n")
	assert.Contains(t, r.Stdout, "-  token: <redacted>\n+  token: <redacted> (changed)\n")
	assert.NotContains(t, r.Stdout, "same: <redacted> (changed)", "a Secret's key the chart keeps is no change")
	assert.NotContains(t, r.Stdout, "stringData", "compared as the server stores it")
	assert.NotContains(t, r.Stdout+r.Stderr, "hunter", "a Secret's value is never printed")
	assert.NotContains(t, r.Stdout+r.Stderr, "kept-secret")
	assert.NotContains(t, r.Stdout, "StorageClass "+name+"-longhorn:", "an object the upgrade leaves as it is shows no change")
	assert.NotContains(t, r.Stdout, "managedFields")

	r = f.cli(n, "preflight", f.upgradeArgs(name, "2.0.0", "-o", "json")...)
	r.RequireCode(t, 0)
	var out struct {
		Target  string                 `json:"target"`
		From    string                 `json:"from"`
		To      string                 `json:"to"`
		Changes []upgrade.ObjectChange `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out), r.Stdout)
	assert.Equal(t, "1.0.0", out.From)
	assert.Equal(t, "2.0.0", out.To)
	actions := map[string]string{}
	for _, c := range out.Changes {
		actions[c.Object] = c.Action
	}
	assert.Equal(t, "update", actions[web])
	assert.Equal(t, "create", actions["ConfigMap "+f.ns+"/"+name+"-added"])
	assert.Equal(t, "delete", actions["ConfigMap "+f.ns+"/"+name+"-dropped"])
	assert.Equal(t, before, len(f.writesBy()), "preflight writes nothing")

	r = f.cli(n, "preflight", f.upgradeArgs(name, "2.0.0", "-o", "patch")...)
	assert.Equal(t, 2, r.Code, "stdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	assert.Contains(t, r.Stderr, `-o "patch"`)
	assert.Contains(t, r.Stderr, "table, diff or json")
}
