package plans

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The Plan files and what they mean, for the test that does not go
// through the CLI.
var planFiles = []struct {
	file string
	opts suc.PlanOptions
}{
	{"30-plan-pinned.yaml", suc.PlanOptions{Name: "chart-upgrader", Namespace: "system-upgrade",
		Image: "ghcr.io/chart-upgrader/chart-upgrader", Version: "1.4.3", NodeSelector: "chart-upgrader.io/upgrade=true",
		SpecSecret: "chart-upgrader-spec", ServiceAccount: "chart-upgrader", Concurrency: 1, WaitTimeout: 20 * time.Minute,
		RunAs: "17017:17017"}},
	{"40-plan-channel.yaml", suc.PlanOptions{Name: "chart-upgrader", Namespace: "system-upgrade",
		Image: "ghcr.io/chart-upgrader/chart-upgrader", Channel: "http://chart-upgrader-channels.system-upgrade.svc/v1/channels/stable",
		NodeSelector: "chart-upgrader.io/upgrade=true", SpecSecret: "chart-upgrader-spec", ServiceAccount: "chart-upgrader",
		Concurrency: 1, WaitTimeout: 20 * time.Minute, RunAs: "17017:17017"}},
}

// Each Plan file is, byte for byte after its leading comment, what
// `chart-upgrader plan` prints for the flags the comment records.
func TestPlanFilesAreWhatThePlanCommandPrints(t *testing.T) {
	for _, pf := range planFiles {
		t.Run(pf.file, func(t *testing.T) {
			text := planFile(t, pf.file)
			args := planCommand(t, pf.file, text)
			code, stdout, stderr := noderun.CLI(t, append([]string{"plan"}, args...)...).Outputs()
			require.Equal(t, 0, code, "chart-upgrader plan %v: %s", args, stderr)
			assert.Empty(t, stderr)
			assert.Equal(t, stdout, body(text), "regenerate %s with the command in its header", pf.file)
		})
	}
}

// The same, through the package (and the options spelled out).
func TestPlanFilesAreWhatBuildMakes(t *testing.T) {
	for _, pf := range planFiles {
		t.Run(pf.file, func(t *testing.T) {
			out, err := suc.Render(pf.opts)
			require.NoError(t, err)
			assert.Equal(t, string(out), body(planFile(t, pf.file)))
		})
	}
}

// What the Plans promise in their comments and in plans/README.md.
func TestPlanFilesKeepTheContract(t *testing.T) {
	for _, pf := range planFiles {
		t.Run(pf.file, func(t *testing.T) {
			text := planFile(t, pf.file)
			args := planCommand(t, pf.file, text)
			wait, err := time.ParseDuration(flagValue(args, "wait-timeout"))
			require.NoError(t, err)
			plan, err := suc.Build(pf.opts)
			require.NoError(t, err)
			s := plan.Spec
			assert.Greater(t, time.Duration(s.JobActiveDeadlineSecs)*time.Second, wait, "the Job outlives the wait")
			assert.Greater(t, s.JobActiveDeadlineSecs, int64(600), "above SUC's default deadline")
			assert.Contains(t, text, "600 s", "the comment cites SUC's default deadline")
			assert.Contains(t, text, "kubectl label node NODE chart-upgrader.io/upgrade=true", "the opt-in is documented")
			assert.EqualValues(t, 1, s.Concurrency)
			assert.Equal(t, map[string]string{"chart-upgrader.io/upgrade": "true"}, s.NodeSelector.MatchLabels)
			assert.Equal(t, "ghcr.io/chart-upgrader/chart-upgrader", s.Upgrade.Image, "no tag: SUC tags it with the version")
			assert.Len(t, s.Tolerations, 4)
			assert.Equal(t, "chart-upgrader-spec", s.Secrets[0].Name)
			assert.False(t, s.Cordon)
			assert.Nil(t, s.Drain)
			assert.Equal(t, suc.DefaultRunAs, flagValue(args, "run-as"))
			assert.Contains(t, text, "docs/security-context.md", "the comment points at the reasoning")
			assert.Contains(t, text, "node cordon|drain|uncordon", "the comment says node operations need no host access")
		})
	}
}

// The Plan files, as kubectl reads them, run the upgrade unprivileged as a
// non-root user, after a prepare container that is root with CAP_CHOWN
// alone; docs/security-context.md documents the same.
func TestPlansRunUnprivileged(t *testing.T) {
	for _, pf := range planFiles {
		t.Run(pf.file, func(t *testing.T) {
			objs := objects(t, pf.file, planFile(t, pf.file))
			require.Len(t, objs, 1)
			plan := objs[0].Object
			ctx := func(container string) map[string]any {
				c, found, err := unstructured.NestedMap(plan, "spec", container, "securityContext")
				require.NoError(t, err)
				require.True(t, found, "spec.%s.securityContext: without it the controller runs the container privileged", container)
				return c
			}
			up := ctx("upgrade")
			assert.Equal(t, map[string]any{
				"privileged": false, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
				"capabilities":   map[string]any{"drop": []any{"ALL"}},
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
				"runAsUser":      float64(17017), "runAsGroup": float64(17017), "runAsNonRoot": true, // JSON numbers
			}, up)
			prep := ctx("prepare")
			assert.Equal(t, map[string]any{
				"privileged": false, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
				"capabilities":   map[string]any{"drop": []any{"ALL"}, "add": []any{"CHOWN"}},
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
				"runAsUser":      float64(0), "runAsGroup": float64(0), "runAsNonRoot": false,
			}, prep)
			args, _, _ := unstructured.NestedStringSlice(plan, "spec", "prepare", "args")
			assert.Equal(t, []string{"host", "prepare", "--owner", "17017:17017"}, args)
			upImage, _, _ := unstructured.NestedString(plan, "spec", "upgrade", "image")
			prepImage, _, _ := unstructured.NestedString(plan, "spec", "prepare", "image")
			assert.Equal(t, upImage, prepImage)
		})
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "security-context.md"))
	require.NoError(t, err)
	for _, want := range []string{suc.DefaultRunAs, "host prepare", "--run-as", "CAP_CHOWN", "readOnlyRootFilesystem", "node cordon|drain|uncordon"} {
		assert.Contains(t, string(doc), want)
	}
}

// Bad flags exit 2 and name the flag.
func TestPlanCommandRefusesBadFlags(t *testing.T) {
	base := []string{"plan", "--name", "chart-upgrader", "--image", "ghcr.io/chart-upgrader/chart-upgrader"}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"image with tag", []string{"plan", "--name", "p", "--image", "ghcr.io/chart-upgrader/chart-upgrader:v0.1.0", "--version", "1.0.0"}, `--image "ghcr.io/chart-upgrader/chart-upgrader:v0.1.0": has a tag (:v0.1.0)`},
		{"no version nor channel", base, "--version: give --version"},
		{"both", append(base, "--version", "1", "--channel", "http://x/v1/channels/a"), "not both"},
		{"bad channel", append(base, "--channel", "stable"), `--channel "stable"`},
		{"bad selector", append(base, "--version", "1", "--node-selector", "upgrade"), `--node-selector "upgrade"`},
		{"bad concurrency", append(base, "--version", "1", "--concurrency", "-1"), `--concurrency "-1"`},
		{"bad namespace", append(base, "--version", "1", "--namespace", "System"), `--namespace "System"`},
		{"bad run-as", append(base, "--version", "1", "--run-as", "1000"), `--run-as "1000": want UID:GID`},
		{"empty name", []string{"plan", "--name", "", "--image", "x", "--version", "1"}, "--name: required"},
		{"unknown kind", append(base, "--version", "1", "--kind", "fleetbundle"), `--kind: unknown kind "fleetbundle" (want managedchart, helmchart or release)`},
		{"not a duration", append(base, "--version", "1", "--wait-timeout", "soon"), "wait-timeout"},
		{"unknown flag", append(base, "--version", "1", "--cluster", "x"), "cluster"},
		{"an argument", append(base, "--version", "1", "extra"), `unexpected argument "extra"`},
		{"check-kubeconfig alone", append(base, "--version", "1", "--check-kubeconfig", "kc"), "--check-kubeconfig and --check-crds need --check-release"},
		{"check-crds alone", append(base, "--version", "1", "--check-crds", "create"), "--check-crds need --check-release"},
		{"check-crds an unknown word", append(base, "--version", "1", "--check-chart", filepath.Join(repoRoot(t), "package", "examples", "charts", "demo-app-2.0.0"),
			"--check-release", "apps/demo", "--check-crds", "replace"), `--check-crds "replace": want skip, create or createReplace`},
		{"check-crds-migrate without createReplace", append(base, "--version", "1", "--check-chart", filepath.Join(repoRoot(t), "package", "examples", "charts", "demo-app-2.0.0"),
			"--check-release", "apps/demo", "--check-crds", "create", "--check-crds-migrate"), `--check-crds-migrate needs --check-crds createReplace`},
		{"check-kubeconfig missing", append(base, "--version", "1", "--check-chart", filepath.Join(repoRoot(t), "package", "examples", "charts", "demo-app-2.0.0"),
			"--check-release", "apps/demo", "--check-kubeconfig", "/nonexistent/kubeconfig"), "--check-kubeconfig: stat /nonexistent/kubeconfig: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := noderun.CLI(t, tc.args...).Outputs()
			assert.Equal(t, outcome.ExitBadInput, code, stderr)
			assert.Empty(t, stdout, "nothing printed on stdout")
			assert.Contains(t, stderr, tc.says)
		})
	}
}

// plan --check-chart with --check-kubeconfig scopes a kind the chart does
// not define by the cluster's discovery: a cluster-scoped kind whose CRD
// another chart installed goes into the ClusterRole, not a Role.
func TestCheckChartScopesByDiscovery(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	group := ns + ".gadgets.example.com"
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgetries.` + group + `}
spec:
  group: ` + group + `
  names: {kind: Gadget, listKind: GadgetList, plural: gadgetries, singular: gadget}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
	_, err := env.Kubectl(t.Context(), "apply", "-f", writeTemp(t, "crd.yaml", crd))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = env.Kubectl(context.Background(), "delete", "crd", "gadgetries."+group) })
	_, err = env.Kubectl(t.Context(), "wait", "--for=condition=Established", "crd/gadgetries."+group, "--timeout=60s")
	require.NoError(t, err)

	chartDir, err := testchart.Write(t.TempDir(), testchart.Chart{Name: "uses", Version: "1.0.0",
		Templates: map[string]string{"g.yaml": "apiVersion: " + group + "/v1\nkind: Gadget\nmetadata: {name: g}\n"}})
	require.NoError(t, err)
	args := []string{"plan", "--image", "r/x", "--version", "1.0.0", "--check-chart", chartDir, "--check-release", "apps/uses"}

	code, out, stderr := noderun.CLI(t, args...).Outputs()
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "kind: Role\n", "without discovery the kind is taken as namespaced")
	assert.Contains(t, out, "- gadgets\n", "and its resource guessed")

	code, out, stderr = noderun.CLI(t, append(args, "--check-kubeconfig", env.KubeconfigPath())...).Outputs()
	require.Equal(t, 0, code, stderr)
	var roles []string
	for _, o := range objects(t, "plan --check-chart", out) {
		if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			roles = append(roles, fmt.Sprintf("%s %v", o.GetKind(), rules))
		}
	}
	require.Len(t, roles, 1, "%v", roles)
	assert.Contains(t, roles[0], "ClusterRole")
	assert.Contains(t, roles[0], "gadgetries", "the resource the cluster serves")
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}
