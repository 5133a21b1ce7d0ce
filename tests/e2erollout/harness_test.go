// Package e2erollout holds preflight to what happens after the apply: on
// a control plane whose workloads run (kube-controller-manager,
// kube-scheduler, KWOK nodes with set allocatable, the real
// helm-controller), each case's upgrade is checked by preflight as the
// kind's Plan ServiceAccount, then really made by the kind's applier (Helm
// 4's upgrade --wait; helm-controller's Job; the Fleet simulator's agent)
// and waited for: preflight must refuse exactly the upgrades that do not
// roll out (Pod Security, ResourceQuota, LimitRange, scheduling,
// ValidatingAdmissionPolicies), for a release, a HelmChart and a
// ManagedChart.
package e2erollout

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/klipperhelm"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{HelmController: true, AuditLog: true})
}

// The world the cases share: the charts (one name per case), the Job
// executor of helm-controller, the Fleet simulator, and a tainted node.
var world struct {
	once   sync.Once
	err    error
	charts string
	exec   *klipperhelm.Executor
	sim    *fleetsim.Sim
	log    bytes.Buffer
}

// TaintedNode is a KWOK node only a pod that tolerates dedicated=rollout
// may use, labelled pool=tainted.
const TaintedNode = "kwok-tainted"

func shared(t *testing.T, env *testenv.Env) {
	t.Helper()
	world.once.Do(func() {
		dir, err := os.MkdirTemp("", "e2erollout-charts")
		if err != nil {
			world.err = err
			return
		}
		world.charts = dir
		logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &world.log}, nil))
		if world.exec, err = klipperhelm.Start(context.Background(), env.Config(), klipperhelm.Options{Log: logger, RestartBackoff: 500 * time.Millisecond}); err != nil {
			world.err = err
			return
		}
		if world.sim, _, err = fleetsim.Start(context.Background(), fleetsim.Options{Config: env.Config(), Loader: fleetsim.DirLoader(dir),
			LiveReadiness: true, RetryBackoff: 500 * time.Millisecond}); err != nil {
			world.err = err
			return
		}
		if world.err = taintedNode(context.Background(), env); world.err != nil {
			return
		}
		world.err = startImages(context.Background(), env)
	})
	require.NoError(t, world.err)
}

// taintedNode adds TaintedNode: 32 CPUs, KWOK's, tainted NoSchedule.
func taintedNode(ctx context.Context, env *testenv.Env) error {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: TaintedNode, Annotations: map[string]string{testenv.KWOKNodeAnnotation: "fake"},
		Labels: map[string]string{"kubernetes.io/hostname": TaintedNode, "type": "kwok", "pool": "tainted"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity}}
	if _, err := env.Kube().CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	taints := []byte(`{"spec":{"taints":[{"key":"dedicated","value":"rollout","effect":"NoSchedule"}]}}`)
	_, err := env.Kube().CoreV1().Nodes().Patch(ctx, TaintedNode, types.MergePatchType, taints, metav1.PatchOptions{})
	return err
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var seq atomic.Int64

// deploymentTemplate is the chart's workload: its replicas, requests,
// limit, security context, node selector, tolerations and a hostPath
// from values; at the defaults, what the restricted Pod Security level
// allows.
const deploymentTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-web
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: {{ .Release.Name }}-web}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}-web}
      {{- with .Values.podAnnotations }}
      annotations: {{ toJson . }}
      {{- end }}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
      {{- with .Values.serviceAccount }}
      serviceAccountName: {{ . }}
      {{- end }}
      {{- with .Values.pullSecrets }}
      imagePullSecrets: {{ toJson . }}
      {{- end }}
      {{- with .Values.initImage }}
      initContainers:
      - name: init
        image: {{ . }}
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
      {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector: {{ toJson . }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations: {{ toJson . }}
      {{- end }}
      containers:
      - name: web
        image: {{ .Values.image }}
        securityContext: {allowPrivilegeEscalation: {{ .Values.privileged }}, privileged: {{ .Values.privileged }}, capabilities: {drop: [ALL]}}
        resources:
          requests: {cpu: {{ .Values.cpu }}, memory: {{ .Values.memory }}}
          {{- if .Values.cpuLimit }}
          limits: {cpu: {{ .Values.cpuLimit }}}
          {{- end }}
        {{- if .Values.readinessProbe }}
        readinessProbe: {httpGet: {path: /healthz, port: 8080}}
        {{- end }}
        {{- if .Values.hostPath }}
        volumeMounts: [{name: host, mountPath: /host}]
        {{- end }}
      {{- if .Values.hostPath }}
      volumes: [{name: host, hostPath: {path: /var/log}}]
      {{- end }}
`

// servicesTemplate is .Values.services Services.
const servicesTemplate = `{{- range $i := until (int .Values.services) }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $.Release.Name }}-svc-{{ $i }}
spec:
  selector: {app: {{ $.Release.Name }}-web}
  ports: [{port: {{ add 80 $i }}}]
{{- end }}
`

// configTemplate is a ConfigMap of .Values.data.
const configTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data: {{ toJson .Values.data }}
`

// hookTemplate is a pre-upgrade hook Job running .Values.hookImage, when
// set.
const hookTemplate = `{{- if .Values.hookImage }}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations: {helm.sh/hook: pre-upgrade, helm.sh/hook-delete-policy: before-hook-creation}
spec:
  backoffLimit: 0
  template:
    metadata:
      {{- with .Values.podAnnotations }}
      annotations: {{ toJson . }}
      {{- end }}
    spec:
      restartPolicy: Never
      securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: migrate
        image: {{ .Values.hookImage }}
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
{{- end }}
`

// defaults are the chart's values at 1.0.0: its image one the origin
// registry of the images world serves.
func defaults() map[string]any {
	return map[string]any{"replicas": 1, "cpu": "100m", "memory": "64Mi", "cpuLimit": "", "privileged": false, "hostPath": false,
		"nodeSelector": map[string]any{}, "tolerations": []any{}, "services": 1, "data": map[string]any{"a": "x"},
		"image": images.origin.Host + "/app:1.0.0", "initImage": "", "hookImage": "", "pullSecrets": []any{}, "serviceAccount": "",
		"podAnnotations": map[string]any{}, "readinessProbe": false}
}

// writeCharts writes chart name at 1.0.0 (defaults) and 2.0.0 (defaults
// with changes laid over) into the shared charts directory.
func writeCharts(t *testing.T, name string, changes map[string]any) {
	t.Helper()
	for _, v := range []string{"1.0.0", "2.0.0"} {
		vals := defaults()
		if v == "2.0.0" {
			for k, x := range changes {
				vals[k] = x
			}
		}
		_, err := testchart.Write(world.charts, testchart.Chart{Name: name, Version: v, Values: vals,
			Templates: map[string]string{"deployment.yaml": deploymentTemplate, "services.yaml": servicesTemplate, "config.yaml": configTemplate,
				"hook.yaml": hookTemplate}})
		require.NoError(t, err)
	}
}

// chartDir is the directory of chart name at version.
func chartDir(name, version string) string { return filepath.Join(world.charts, name+"-"+version) }

// chartContent is the base64 .tgz of chart name at version, for a
// HelmChart's spec.chartContent.
func chartContent(t *testing.T, name, version string) string {
	t.Helper()
	c, err := loader.Load(chartDir(name, version))
	require.NoError(t, err)
	data, err := chartpkg.Archive(c)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(data)
}

// planServiceAccount creates the Plan RBAC of file (under plans/) with
// its names moved by replacements (its objects named in skip left out),
// and what plan --check-chart derives for chart name 2.0.0 as release
// relNS/release, with planArgs; it returns a kubeconfig acting as the
// ServiceAccount.
func planServiceAccount(t *testing.T, env *testenv.Env, file, kind, sa, sucNS, chart, relNS, release string, skip, planArgs []string, replacements ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "plans", file))
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	for _, o := range rbaccheck.Decode(t, strings.NewReplacer(replacements...).Replace(string(data))) {
		if !contains(skip, o.GetName()) {
			objs = append(objs, o)
		}
	}
	plan := noderun.CLI(t, append([]string{"plan", "--kind", kind, "--image", "registry.example/chart-upgrader", "--version", "2.0.0", "--namespace", sucNS,
		"--service-account", sa, "--name", "check-" + release, "--check-chart", chartDir(chart, "2.0.0"), "--check-release", relNS + "/" + release}, planArgs...)...)
	plan.RequireCode(t, 0)
	for _, o := range rbaccheck.Decode(t, plan.Stdout) {
		if o.GetKind() != "Plan" {
			objs = append(objs, o)
		}
	}
	rbaccheck.Create(t, env, objs)
	return rbaccheck.Impersonating(t, env, "system:serviceaccount:"+sucNS+":"+sa, sucNS)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// name is a name unique in the test binary.
func name(prefix string) string { return fmt.Sprintf("%s%d", prefix, seq.Add(1)) }
