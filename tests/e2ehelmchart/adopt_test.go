package e2ehelmchart

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/hotfix"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
)

// An operator's hotfixes (the real kubectl) of a chart helm-controller's
// Job deployed server-side, everything run as the k3s Plan's
// ServiceAccount: drift names each in values terms; without adopt rules
// the upgrade is refused as before; with adopt rules on the Deployment's
// fields only the ConfigMap key is; with one on it too the real Job
// upgrades with no force, and the hotfixes stay, shared with Helm. No
// request is refused by the Plan's RBAC.
func TestAdoptAnOperatorsHotfixesUnderAHelmChart(t *testing.T) {
	f := newFixture(t)
	hotfix.Charts(t, f.charts)
	name := release()
	k := f.k3sPlan(name, true)
	// as plans/k3s/10-rbac.yaml says to adapt it: a chart with a
	// Deployment needs deployments, for its readiness
	saName := k.sa[strings.LastIndex(k.sa, ":")+1:]
	rbaccheck.Create(t, f.env, rbaccheck.Decode(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: `+saName+`-deployments, namespace: `+k.relNS+`}
rules:
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: `+saName+`-deployments, namespace: `+k.relNS+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: `+saName+`-deployments}
subjects:
- {kind: ServiceAccount, name: `+saName+`, namespace: `+k.sucNS+`}
`))
	rbaccheck.WaitAuthorized(t, k.kubeconfig, func(ctx context.Context, kube kubernetes.Interface) error {
		_, err := kube.AppsV1().Deployments(k.relNS).List(ctx, metav1.ListOptions{})
		return err
	})
	f.demoteStorageClass(name + "-longhorn")
	hotfix.Make(t, f.env, k.relNS, name, true)
	n := newNode(t, "node-1")

	r := f.cliAs(k.kubeconfig, n, "drift", "--target", f.target(name), "-o", "json")
	r.RequireCode(t, 0)
	hotfix.CheckDrift(t, r.Stdout, k.relNS, name, true)
	hotfix.UndoHardCoded(t, f.env, k.relNS, name)
	before := f.get(name)

	args := func(policy string) []string {
		return []string{"--target", f.target(name), "--chart-source", f.charts, "--version", "2.0.0", "--policy", policy, "--timeout", "90s"}
	}
	r = f.cliAs(k.kubeconfig, n, "upgrade", args(k.policy)...)
	r.RequireCode(t, outcome.ExitRefused)
	for _, want := range []string{hotfix.ImageField + ` is owned by "kubectl-set"`, "{path: web.image.tag, policy: adopt}",
		hotfix.ReplicasField + ` is owned by "kubectl"`, hotfix.RetentionField + ` is owned by "kubectl-patch"`} {
		assert.Contains(t, r.Stderr, want)
	}

	r = f.cliAs(k.kubeconfig, n, "preflight", args(hotfix.WithRules(t, k.policy, hotfix.AdoptDeployment))...)
	r.RequireCode(t, outcome.ExitRefused)
	assert.Contains(t, r.Stderr, hotfix.RetentionField+` is owned by "kubectl-patch"`)
	assert.NotContains(t, r.Stderr, hotfix.ImageField)
	assert.NotContains(t, r.Stderr, hotfix.ReplicasField)
	assert.Equal(t, before.ResourceVersion, f.get(name).ResourceVersion, "the HelmChart is untouched")

	r = f.cliAs(k.kubeconfig, n, "upgrade", args(hotfix.WithRules(t, k.policy, hotfix.AdoptDeployment+hotfix.AdoptConfigMap))...)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "adopted from the live Deployment "+k.relNS+"/"+name+"-web")
	f.waitDeployed(name, "2.0.0")
	hotfix.CheckKept(t, f.env, k.relNS, name, cluster.HelmFieldManager)
	_, denied := rbaccheck.Requests(t, f.env, k.sa)
	assert.Empty(t, denied, "requests of %s the RBAC refused", k.sa)
}
