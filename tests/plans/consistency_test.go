package plans

import (
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/channel"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// rule is one RBAC rule with where it applies.
type rule struct {
	namespace                                  string // "" for a ClusterRole
	groups, resources, resourceNames, verbsSet []string
}

// rbacRules reads the Roles and ClusterRoles of an RBAC manifest.
func rbacRules(t *testing.T, objs []*unstructured.Unstructured) []rule {
	t.Helper()
	var out []rule
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, err := unstructured.NestedSlice(o.Object, "rules")
		require.NoError(t, err)
		for _, r := range rules {
			m := r.(map[string]any)
			strs := func(key string) []string {
				v, _, err := unstructured.NestedStringSlice(m, key)
				require.NoError(t, err)
				return v
			}
			out = append(out, rule{namespace: o.GetNamespace(), groups: strs("apiGroups"), resources: strs("resources"),
				resourceNames: strs("resourceNames"), verbsSet: strs("verbs")})
		}
	}
	return out
}

// allows says whether a rule grants verb on group/resource (name, when
// the rule is limited by name) in namespace ("" = cluster-wide).
func allows(rules []rule, namespace, group, resource, name, verb string) bool {
	for _, r := range rules {
		if r.namespace != "" && r.namespace != namespace {
			continue
		}
		if slices.Contains(r.groups, group) && slices.Contains(r.resources, resource) && slices.Contains(r.verbsSet, verb) &&
			(len(r.resourceNames) == 0 || slices.Contains(r.resourceNames, name)) {
			return true
		}
	}
	return false
}

// No wildcard anywhere; bindings point at the ServiceAccount of the Plans.
func TestRBACHasNoWildcards(t *testing.T) {
	objs := objects(t, "10-rbac.yaml", planFile(t, "10-rbac.yaml"))
	for _, r := range rbacRules(t, objs) {
		for _, list := range [][]string{r.groups, r.resources, r.resourceNames, r.verbsSet} {
			for _, v := range list {
				assert.NotContains(t, v, "*", "wildcard in %+v", r)
			}
		}
		assert.NotContains(t, r.verbsSet, "delete")
		assert.NotContains(t, r.verbsSet, "patch")
	}
	sa := find(t, objs, "ServiceAccount", suc.DefaultServiceAccount)
	assert.Equal(t, suc.DefaultNamespace, sa.GetNamespace())
	for _, o := range objs {
		if !strings.HasSuffix(o.GetKind(), "Binding") {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		require.Len(t, subjects, 1, o.GetName())
		assert.Equal(t, map[string]any{"kind": "ServiceAccount", "name": suc.DefaultServiceAccount, "namespace": suc.DefaultNamespace}, subjects[0])
	}
}

// The spec in 20-spec-secret.yaml parses, its waits add up to the Plans'
// --wait-timeout, and 10-rbac.yaml covers its targets, their release
// namespace and the objects its rules read.
func TestSpecSecretAgreesWithPlansAndRBAC(t *testing.T) {
	objs := objects(t, "20-spec-secret.yaml", planFile(t, "20-spec-secret.yaml"))
	require.Len(t, objs, 1)
	secret := objs[0]
	assert.Equal(t, suc.DefaultSpecSecret, secret.GetName())
	assert.Equal(t, suc.DefaultNamespace, secret.GetNamespace())
	text, found, err := unstructured.NestedString(secret.Object, "stringData", suc.SpecKey)
	require.NoError(t, err)
	require.True(t, found, "stringData has no %s", suc.SpecKey)
	sp, err := spec.ParseSpec(suc.SpecKey, []byte(text), targets.Kinds())
	require.NoError(t, err)

	var targets []string
	var total time.Duration
	for _, c := range sp.Charts {
		targets = append(targets, c.Target.Name)
		total += c.Wait.Timeout
	}
	assert.Equal(t, []string{"harvester-crd", "harvester"}, targets, "harvester-crd before harvester")
	for _, pf := range planFiles {
		args := planCommand(t, pf.file, planFile(t, pf.file))
		wait, err := time.ParseDuration(flagValue(args, "wait-timeout"))
		require.NoError(t, err)
		assert.Equal(t, total, wait, "%s: --wait-timeout is the sum of the spec's waits", pf.file)
	}

	rules := rbacRules(t, objects(t, "10-rbac.yaml", planFile(t, "10-rbac.yaml")))
	for _, c := range sp.Charts {
		ns, name := c.Target.Namespace, c.Target.Name
		for _, verb := range []string{"get", "list", "watch", "update"} {
			assert.True(t, allows(rules, ns, "management.cattle.io", "managedcharts", name, verb), "%s managedchart %s/%s", verb, ns, name)
		}
		for _, verb := range []string{"get", "list", "watch"} {
			assert.True(t, allows(rules, ns, "fleet.cattle.io", "bundles", "mcc-"+name, verb), "%s bundle %s/mcc-%s", verb, ns, name)
		}
		for _, verb := range []string{"get", "create", "update"} {
			assert.True(t, allows(rules, ns, "coordination.k8s.io", "leases", "chart-upgrader-"+name, verb), "%s lease", verb)
		}
		assert.True(t, allows(rules, ns, "", "events", "", "create"))
		assert.True(t, allows(rules, ns, "", "secrets", "", "create"), "backup secret")
		// Harvester releases both charts into harvester-system
		assert.True(t, allows(rules, "harvester-system", "", "secrets", "", "list"), "Helm release records")
		for _, r := range c.Rules {
			if r.Policy != values.PolicyLive && r.Policy != values.PolicyOnce {
				continue
			}
			src := r.Source
			group, _, _ := strings.Cut(src.APIVersion, "/")
			if !strings.Contains(src.APIVersion, "/") {
				group = ""
			}
			resource := resourceOf(src.Kind)
			assert.True(t, allows(rules, src.Namespace, group, resource, src.Name, "get"), "get %s %s/%s for rule %v", resource, src.Namespace, src.Name, r.Pattern)
		}
		// each health gate's kind, listed and watched where it reads
		reads := suc.SpecReads{}
		reads.GateReads(c.Wait.Health, nil, "harvester-system", suc.Scope(nil, nil))
		for ns, rs := range reads {
			for _, r := range rs {
				for _, verb := range r.Verbs {
					assert.True(t, allows(rules, ns, r.APIGroups[0], r.Resources[0], "", verb), "%s %s in %q for the health gates", verb, r.Resources[0], ns)
				}
			}
		}
	}
}

// resourceOf is the resource of the kinds a spec reads (Secret → secrets,
// StorageClass → storageclasses).
func resourceOf(kind string) string {
	k := strings.ToLower(kind)
	if strings.HasSuffix(k, "s") {
		return k + "es"
	}
	return k + "s"
}

// 50-channel-server.yaml serves the channel 40-plan-channel.yaml follows,
// with a configuration `chart-upgrader channel serve` accepts.
func TestChannelServerServesThePlansChannel(t *testing.T) {
	objs := objects(t, "50-channel-server.yaml", planFile(t, "50-channel-server.yaml"))
	cm := find(t, objs, "ConfigMap", "chart-upgrader-channels")
	deploy := find(t, objs, "Deployment", "chart-upgrader-channels")
	svc := find(t, objs, "Service", "chart-upgrader-channels")

	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	require.GreaterOrEqual(t, len(args), 4)
	assert.Equal(t, []string{"channel", "serve"}, args[:2])
	config := flagValue(args, "config")
	assert.Equal(t, "/etc/chart-upgrader/channels.yaml", config)
	listen := flagValue(args, "listen")
	mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	require.Len(t, mounts, 1)
	assert.Equal(t, path.Dir(config), mounts[0].(map[string]any)["mountPath"])
	image, _, _ := unstructured.NestedString(c, "image")
	assert.True(t, strings.HasPrefix(image, "ghcr.io/chart-upgrader/chart-upgrader:"), image)

	data, _, _ := unstructured.NestedString(cm.Object, "data", path.Base(config))
	cfg, err := channel.ParseConfig(config, []byte(data))
	require.NoError(t, err)
	assert.Equal(t, "harvester", cfg.Chart, "the channel follows the last chart of the spec")

	// the Plan's channel URL reaches this Service and names one of its channels
	args40 := planCommand(t, "40-plan-channel.yaml", planFile(t, "40-plan-channel.yaml"))
	u, err := url.Parse(flagValue(args40, "channel"))
	require.NoError(t, err)
	assert.Equal(t, svc.GetName()+"."+svc.GetNamespace()+".svc", u.Hostname())
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Len(t, ports, 1)
	port := ports[0].(map[string]any)
	assert.EqualValues(t, 80, port["port"], "the URL has no port")
	assert.Equal(t, ":8080", listen)
	name, ok := strings.CutPrefix(u.Path, "/v1/channels/")
	require.True(t, ok, u.Path)
	var names []string
	for _, ch := range cfg.Channels {
		names = append(names, ch.Name)
	}
	assert.Contains(t, names, name)
}
