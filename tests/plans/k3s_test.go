package plans

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/plainrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The k3s/RKE2 Plans of plans/k3s/ and what they mean.
var k3sPlanFiles = []struct {
	file string
	opts suc.PlanOptions
}{
	{"k3s/30-plan-pinned.yaml", suc.PlanOptions{Name: "chart-upgrader-helmchart", Namespace: "system-upgrade",
		Image: "ghcr.io/chart-upgrader/chart-upgrader", Version: "2.0.0", NodeSelector: "node-role.kubernetes.io/control-plane=true",
		SpecSecret: "chart-upgrader-helmchart-spec", ServiceAccount: "chart-upgrader-helmchart", Concurrency: 1,
		WaitTimeout: 15 * time.Minute, RunAs: "17017:17017"}},
	{"k3s/40-plan-channel.yaml", suc.PlanOptions{Name: "chart-upgrader-helmchart", Namespace: "system-upgrade",
		Image: "ghcr.io/chart-upgrader/chart-upgrader", Channel: "http://chart-upgrader-channels.system-upgrade.svc/v1/channels/stable",
		NodeSelector: "node-role.kubernetes.io/control-plane=true", SpecSecret: "chart-upgrader-helmchart-spec",
		ServiceAccount: "chart-upgrader-helmchart", Concurrency: 1, WaitTimeout: 15 * time.Minute, RunAs: "17017:17017"}},
}

// Each k3s Plan file is what `chart-upgrader plan` prints for the flags in
// its header, and what the package builds from the options spelled out;
// `plan --kind helmchart` alone gives the same names.
func TestK3sPlanFiles(t *testing.T) {
	for _, pf := range k3sPlanFiles {
		t.Run(pf.file, func(t *testing.T) {
			text := planFile(t, pf.file)
			args := planCommand(t, pf.file, text)
			code, stdout, stderr := noderun.CLI(t, append([]string{"plan"}, args...)...).Outputs()
			require.Equal(t, 0, code, "chart-upgrader plan %v: %s", args, stderr)
			assert.Equal(t, stdout, body(text), "regenerate %s with the command in its header", pf.file)
			out, err := suc.Render(pf.opts)
			require.NoError(t, err)
			assert.Equal(t, string(out), body(text))
		})
	}
	base := []string{"plan", "--kind", "helmchart", "--image", "ghcr.io/chart-upgrader/chart-upgrader", "--version", "2.0.0", "--wait-timeout", "15m"}
	code, stdout, stderr := noderun.CLI(t, base...).Outputs()
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, body(planFile(t, "k3s/30-plan-pinned.yaml")), stdout, "the kind's defaults are the names of plans/k3s/")
}

// The spec of plans/k3s/20-spec-secret.yaml parses, its waits add up to
// the Plans' --wait-timeout, and plans/k3s/10-rbac.yaml grants what a
// HelmChart upgrade reads and writes (docs/helmchart.md#rbac), bound to the
// Plans' ServiceAccount, without wildcards.
func TestK3sSpecAndRBACAgree(t *testing.T) {
	objs := objects(t, "k3s/20-spec-secret.yaml", planFile(t, "k3s/20-spec-secret.yaml"))
	require.Len(t, objs, 1)
	d := helmchart.Descriptor.Plan
	assert.Equal(t, d.SpecSecret, objs[0].GetName())
	text, _, err := unstructured.NestedString(objs[0].Object, "stringData", suc.SpecKey)
	require.NoError(t, err)
	sp, err := spec.ParseSpec(suc.SpecKey, []byte(text), targets.Kinds())
	require.NoError(t, err)
	var total time.Duration
	for _, c := range sp.Charts {
		assert.Equal(t, helmchart.Descriptor.Name, c.Target.Kind)
		total += c.Wait.Timeout
	}
	for _, pf := range k3sPlanFiles {
		assert.Equal(t, total, pf.opts.WaitTimeout, pf.file)
	}

	rbacObjs := objects(t, "k3s/10-rbac.yaml", planFile(t, "k3s/10-rbac.yaml"))
	rules := rbacRules(t, rbacObjs)
	for _, r := range rules {
		for _, list := range [][]string{r.groups, r.resources, r.resourceNames, r.verbsSet} {
			for _, v := range list {
				assert.NotContains(t, v, "*", "wildcard in %+v", r)
			}
		}
		assert.NotContains(t, r.verbsSet, "delete")
		assert.NotContains(t, r.verbsSet, "patch")
	}
	for _, o := range rbacObjs {
		if strings.HasSuffix(o.GetKind(), "Binding") {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			require.Len(t, subjects, 1, o.GetName())
			assert.Equal(t, map[string]any{"kind": "ServiceAccount", "name": d.ServiceAccount, "namespace": suc.DefaultNamespace}, subjects[0])
		}
	}
	const release = "demo-system" // the example HelmChart's spec.targetNamespace
	for _, c := range sp.Charts {
		ns, name := c.Target.Namespace, c.Target.Name
		for _, verb := range []string{"get", "list", "watch", "update"} {
			assert.True(t, allows(rules, ns, "helm.cattle.io", "helmcharts", name, verb), "%s helmchart %s/%s", verb, ns, name)
		}
		assert.True(t, allows(rules, ns, "helm.cattle.io", "helmchartconfigs", name, "get"))
		for _, verb := range []string{"get", "list", "watch"} {
			assert.True(t, allows(rules, ns, "batch", "jobs", helmchart.JobName(name), verb), "%s job", verb)
			assert.True(t, allows(rules, ns, "", "secrets", helmchart.ValuesSecretName(name), verb), "%s values secret", verb)
			assert.True(t, allows(rules, release, "", "secrets", "", verb), "%s helm release records", verb)
		}
		assert.True(t, allows(rules, ns, "", "pods", "", "list"))
		assert.True(t, allows(rules, ns, "", "secrets", "", "create"), "backup secret")
		for _, verb := range []string{"get", "create", "update"} {
			assert.True(t, allows(rules, ns, "coordination.k8s.io", "leases", "chart-upgrader-helmchart-"+name, verb), "%s lease", verb)
		}
		assert.True(t, allows(rules, ns, "", "events", "", "create"))
		for _, r := range c.Rules {
			if r.Policy != values.PolicyLive && r.Policy != values.PolicyOnce {
				continue
			}
			group, _, _ := strings.Cut(r.Source.APIVersion, "/")
			if !strings.Contains(r.Source.APIVersion, "/") {
				group = ""
			}
			assert.True(t, allows(rules, r.Source.Namespace, group, resourceOf(r.Source.Kind), r.Source.Name, "get"), "rule %v", r.Pattern)
		}
	}
}

// Every object of plans/k3s/ is accepted by the API server, as
// `kubectl apply --dry-run=server` would.
func TestK3sManifestsAcceptedByTheAPIServer(t *testing.T) {
	env := testenv.ForTest(t)
	m := mapper(t, env)
	// fresh namespaces stand for SUC's and the release's (the manifests of
	// plans/ use the same names)
	moved := strings.NewReplacer("namespace: system-upgrade", "namespace: "+env.Namespace(t),
		"namespace: demo-system", "namespace: "+env.Namespace(t))
	plans := 0
	for _, file := range []string{"k3s/10-rbac.yaml", "k3s/20-spec-secret.yaml", "k3s/30-plan-pinned.yaml", "k3s/40-plan-channel.yaml"} {
		plans += acceptAll(t, env, m, file, moved.Replace(planFile(t, file)))["Plan"]
	}
	assert.Equal(t, 2, plans)
}

// plans/release/: the Plan is what `plan --kind release` prints, every
// file is accepted by the API server, the spec parses and names a Release.
func TestReleasePlanFiles(t *testing.T) {
	text := planFile(t, "release/30-plan-pinned.yaml")
	args := planCommand(t, "release/30-plan-pinned.yaml", text)
	code, stdout, stderr := noderun.CLI(t, append([]string{"plan"}, args...)...).Outputs()
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, stdout, body(text), "regenerate plans/release/30-plan-pinned.yaml with the command in its header")
	code, stdout, stderr = noderun.CLI(t, "plan", "--kind", "release", "--image", "ghcr.io/chart-upgrader/chart-upgrader", "--version", "2.0.0", "--wait-timeout", "15m").Outputs()
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, body(text), stdout, "the kind's defaults are the names of plans/release/")

	objs := objects(t, "release/20-spec-secret.yaml", planFile(t, "release/20-spec-secret.yaml"))
	require.Len(t, objs, 1)
	specText, _, err := unstructured.NestedString(objs[0].Object, "stringData", suc.SpecKey)
	require.NoError(t, err)
	sp, err := spec.ParseSpec(suc.SpecKey, []byte(specText), targets.Kinds())
	require.NoError(t, err)
	require.Len(t, sp.Charts, 1)
	assert.Equal(t, plainrelease.Descriptor.Name, sp.Charts[0].Target.Kind)
	assert.Equal(t, plainrelease.Options{RollbackOnFailure: true, HistoryMax: 10}, sp.Charts[0].Options)

	env := testenv.ForTest(t)
	m := mapper(t, env)
	moved := strings.NewReplacer("namespace: system-upgrade", "namespace: "+env.Namespace(t),
		"namespace: demo-system", "namespace: "+env.Namespace(t))
	for _, file := range []string{"release/10-rbac.yaml", "release/20-spec-secret.yaml", "release/30-plan-pinned.yaml"} {
		acceptAll(t, env, m, file, moved.Replace(planFile(t, file)))
	}
}
