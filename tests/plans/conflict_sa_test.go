package plans

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// As the Plan's ServiceAccount, with plans/10-rbac.yaml and the read-only
// RBAC of `plan --check-chart` as its only permissions, an operator's
// `kubectl patch` hotfix of a field the upgrade changes (one Fleet's drift
// check is told to ignore, so the Bundle stays Ready) makes `preflight`
// and `upgrade` exit 3, naming the object, the field and the manager;
// nothing is written. `drift`, as the same ServiceAccount, names the field
// in values terms with the adopt rule that keeps it.
func TestAHotfixIsNamedAsTheServiceAccount(t *testing.T) {
	// the chart's StorageClass is cluster-scoped: the next test of this API
	// server installs the same chart (registered first, so it runs last,
	// once the simulated agent has stopped)
	var env *testenv.Env
	t.Cleanup(func() {
		if env == nil {
			return
		}
		_ = env.Kube().StorageV1().StorageClasses().Delete(context.Background(), demo+"-longhorn", metav1.DeleteOptions{})
	})
	w := newWorld(t)
	env = w.env
	ctx := t.Context()
	w.readyNode(t, "rbac-node-hotfix")
	w.install(t)
	_, err := w.env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(w.target).Patch(ctx, demo, types.MergePatchType,
		[]byte(`{"spec":{"diff":{"comparePatches":[{"apiVersion":"v1","kind":"ConfigMap","name":"`+demo+`-config","jsonPointers":["/data/replicaCount"]},`+
			`{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","name":"`+demo+`-longhorn","jsonPointers":["/metadata/annotations/storageclass.kubernetes.io~1is-default-class"]}]}}}`),
		metav1.PatchOptions{FieldManager: "someone-else"})
	require.NoError(t, err)
	_, err = w.env.Kubectl(ctx, "-n", w.release, "patch", "configmap", demo+"-config", "--type", "merge", "-p", `{"data":{"replicaCount":"9"}}`)
	require.NoError(t, err)
	tc := &managedchart.Client{Dynamic: w.env.Dynamic(), Kube: w.env.Kube()}
	// the simulated agent takes the new diff options: the Bundle settles Ready
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := tc.Bundle(ctx, w.target, demo)
		if err != nil || b == nil {
			return false, nil
		}
		c, ok := b.Status.Condition("Ready")
		return b.Status.ObservedGeneration == b.Generation && ok && c.Status == "True", nil
	}))
	before, _, err := tc.Get(ctx, w.target, demo)
	require.NoError(t, err)

	specFile := w.specFile(t)
	host := t.TempDir()
	for k, v := range map[string]string{
		suc.SpecEnv:                          specFile,
		"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "2.0.0",
		"SYSTEM_UPGRADE_NODE_NAME":           "rbac-node-hotfix",
		"KUBECONFIG":                         w.kubeconfig,
	} {
		t.Setenv(k, v)
	}
	local := []string{"--host-root", host, "--termination-log", filepath.Join(host, "termination-log")}
	for _, cmd := range []string{"preflight", "upgrade"} {
		code, stdout, stderr := noderun.CLI(t, append([]string{cmd}, local...)...).Outputs()
		require.Equal(t, outcome.ExitRefused, code, "%s as %s:\n%s\n%s", cmd, w.sa, stderr, stdout)
		for _, want := range []string{
			"field-manager conflict: ConfigMap " + w.release + "/" + demo + "-config .data.replicaCount",
			`owned by "kubectl-patch"`,
			"live: 9; the upgrade sets:",
			`Fleet's agent applies this chart server-side as "fleetagent" and would fail`,
		} {
			assert.Contains(t, stderr, want, cmd)
		}
		assert.NotContains(t, stderr, "not checked", cmd)
		assert.NotContains(t, strings.ToLower(stderr), "forbidden", cmd)
	}
	// drift reads what the conflict check reads: the Plan's RBAC lets it
	code, stdout, stderr := noderun.CLI(t, append([]string{"drift", "--target", "managedchart/" + w.target + "/" + demo, "--chart-source", w.charts}, local...)...).Outputs()
	require.Equal(t, 0, code, "drift as %s:\n%s\n%s", w.sa, stderr, stdout)
	assert.Regexp(t, `ConfigMap `+w.release+`/`+demo+`-config +\.data\.replicaCount +kubectl-patch \(Update\) +9 +2 +storageClass\.replicaCount +\{path: storageClass\.replicaCount, policy: adopt\} \(or --set storageClass\.replicaCount=9\)`, stdout)
	after, _, err := tc.Get(ctx, w.target, demo)
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the ManagedChart is untouched")
	assert.Equal(t, "1.0.0", after.Version)
	_, denied := w.requests(t)
	assert.Empty(t, denied, "requests the RBAC refused")
}
