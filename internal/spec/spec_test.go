package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/plainrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// doc joins lines into a YAML file; lines[i] is line i+1, which keeps the
// expected line numbers of the tests easy to check.
func doc(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

var designSpec = doc(
	`apiVersion: chart-upgrader.io/v1alpha1`, // 1
	`kind: UpgradeSpec`,
	`charts:`,
	`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester-crd}`,
	`  chart: {name: harvester-crd, source: /charts}`, // 5
	`- target: {kind: managedchart, namespace: fleet-local, name: harvester}`,
	`  chart: {name: harvester, source: https://charts.example.com}`,
	`  rules:`,
	`  - {path: "harvester-network-controller.**.image.tag", policy: chart}`,
	`  - {path: "**.resources", policy: max}`, // 10
	`  - {path: "promote.**", policy: readonly}`,
	`  - path: storageClass.defaultStorageClass`,
	`    policy: live`,
	`    source: {apiVersion: storage.k8s.io/v1, kind: StorageClass, name: harvester-longhorn}`,
	`    expr: '.metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"'`, // 15
	`  migrations:`,
	`  - {name: drop-kube-vip-config, from: "<1.1.0", expr: 'del(.kube-vip.config)'}`,
	`  - {name: bump, from: "1.10", to: ">=1.2.0", expr: '.a = 1'}`,
	`  wait: {timeout: 45m}`,
)

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec("spec.yaml", designSpec, kinds)
	require.NoError(t, err)
	assert.Equal(t, "spec.yaml", s.File)
	require.Len(t, s.Charts, 2)

	crd := s.Charts[0]
	assert.Equal(t, Target{Kind: "managedchart", Namespace: "fleet-local", Name: "harvester-crd"}, crd.Target)
	assert.Equal(t, ChartRef{Name: "harvester-crd", Source: "/charts"}, crd.Chart)
	assert.Empty(t, crd.Rules)
	assert.Empty(t, crd.Migrations)
	assert.Equal(t, DefaultWaitTimeout, crd.Wait.Timeout)

	h := s.Charts[1]
	assert.Equal(t, "managedchart/fleet-local/harvester", h.Target.String())
	assert.Equal(t, "managedchart", h.Target.Kind, "kind is case-insensitive and canonicalised")
	assert.Equal(t, ChartRef{Name: "harvester", Source: "https://charts.example.com"}, h.Chart)
	require.Len(t, h.Rules, 4)
	var patterns []string
	var policies []values.Policy
	for _, r := range h.Rules {
		patterns = append(patterns, r.Pattern.String())
		policies = append(policies, r.Policy)
	}
	assert.Equal(t, []string{"harvester-network-controller.**.image.tag", "**.resources", "promote.**",
		"storageClass.defaultStorageClass"}, patterns)
	assert.Equal(t, []values.Policy{values.PolicyChart, values.PolicyMax, values.PolicyReadonly, values.PolicyLive}, policies)
	live := h.Rules[3]
	require.NotNil(t, live.Source)
	assert.Equal(t, values.ObjectRef{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: "harvester-longhorn"}, *live.Source)
	require.NotNil(t, live.Expr)
	assert.Equal(t, `.metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"`, live.Expr.String())

	require.Len(t, h.Migrations, 2)
	assert.Equal(t, "drop-kube-vip-config", h.Migrations[0].Name)
	assert.Equal(t, "del(.kube-vip.config)", h.Migrations[0].Expr.String())
	assert.NotNil(t, h.Migrations[0].From)
	assert.Nil(t, h.Migrations[0].To)
	assert.Equal(t, "bump", h.Migrations[1].Name)
	assert.NotNil(t, h.Migrations[1].To)
	assert.Equal(t, 45*time.Minute, h.Wait.Timeout)
}

func TestParseSpecWaitDefaults(t *testing.T) {
	for _, wait := range []string{``, `  wait:`, `  wait: {}`, `  wait: {timeout: null}`, `  wait: {errAppliedGrace: null}`} {
		s, err := ParseSpec("spec.yaml", doc(
			`apiVersion: chart-upgrader.io/v1alpha1`,
			`kind: UpgradeSpec`,
			`charts:`,
			`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
			`  chart: {name: harvester, source: /charts}`,
			wait,
		), kinds)
		require.NoError(t, err, wait)
		assert.Equal(t, 20*time.Minute, s.Charts[0].Wait.Timeout, wait)
		assert.Equal(t, time.Minute, s.Charts[0].Wait.FailureGrace, wait)
	}
}

func TestParseSpecHealthGates(t *testing.T) {
	s, err := ParseSpec("spec.yaml", doc(specHead, target1, chart1,
		`  wait:`,
		`    timeout: 20m`,
		`    health:`,
		`    - apiVersion: kubevirt.io/v1`,
		`      kind: KubeVirt`,
		`      current: "status.phase == 'Deployed' && status.observedKubeVirtVersion == status.targetKubeVirtVersion"`,
		`      failed: "status.phase == 'Failed'"`,
		`    - apiVersion: longhorn.io/v1beta2`,
		`      kind: InstanceManager`,
		`      namespace: longhorn-system`,
		`      selector: "longhorn.io/instance-manager-type=aio"`,
		`      minCount: 3`,
		`      current: "status.currentState == 'running' && spec.image == values.image.longhorn.instanceManager.tag"`,
	), kinds)
	require.NoError(t, err)
	gates := s.Charts[0].Wait.Health
	require.Len(t, gates, 2)
	assert.True(t, gates[0].Rendered())
	assert.Equal(t, 1, gates[0].MinCount)
	assert.NotNil(t, gates[0].Failed)
	assert.Nil(t, gates[0].InProgress)
	assert.Equal(t, "spec.yaml:9: charts[1].wait.health[1]", gates[0].At)
	assert.False(t, gates[1].Rendered())
	assert.Equal(t, 3, gates[1].MinCount)
	assert.Equal(t, "InstanceManager longhorn.io/v1beta2 in longhorn-system (longhorn.io/instance-manager-type=aio)", gates[1].String())
}

func TestParseSpecErrAppliedGrace(t *testing.T) {
	s, err := ParseSpec("spec.yaml", doc(
		`apiVersion: chart-upgrader.io/v1alpha1`,
		`kind: UpgradeSpec`,
		`charts:`,
		`- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}`,
		`  chart: {name: harvester, source: /charts}`,
		`  wait: {timeout: 30m, errAppliedGrace: 2m30s}`,
	), kinds)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Minute, s.Charts[0].Wait.Timeout)
	assert.Equal(t, 150*time.Second, s.Charts[0].Wait.FailureGrace)
}

func TestParsePolicy(t *testing.T) {
	_, err := ParsePolicy("policy.yaml", doc(
		`# anchors and aliases are followed`,
		`x-src: &src {apiVersion: v1, kind: Secret, namespace: cattle-system, name: tls}`,
	))
	require.Error(t, err, "x-src is not a policy field")

	p, err := ParsePolicy("policy.yaml", doc(
		`rules:`,
		`- {path: "a.*.image.tag", policy: chart}`,
		`- path: 'tls["ca.crt"]'`,
		`  policy: once`,
		`  source: &src {apiVersion: v1, kind: Secret, namespace: cattle-system, name: tls}`,
		`  expr: '.data["ca.crt"]'`,
		`- path: tls.key`,
		`  policy: once`,
		`  source: *src`,
		`  expr: '.data["tls.key"]'`,
		`- {path: "**", policy: follow}`,
		`migrations:`,
		`- name: rename`,
		`  from: "< 1.2"`,
		`  expr: '.b = .a | del(.a)'`,
	))
	require.NoError(t, err)
	require.Len(t, p.Rules, 4)
	assert.Equal(t, `tls["ca.crt"]`, p.Rules[1].Pattern.String())
	assert.Equal(t, values.PolicyOnce, p.Rules[1].Policy)
	assert.Equal(t, p.Rules[1].Source, p.Rules[2].Source)
	assert.Equal(t, "cattle-system", p.Rules[2].Source.Namespace)
	assert.Equal(t, values.PolicyFollow, p.Rules[3].Policy)
	require.Len(t, p.Migrations, 1)
	assert.Equal(t, "rename", p.Migrations[0].Name)
}

func TestParsePolicyEmpty(t *testing.T) {
	// A policy without rules is written as such; an empty file is an error
	// (see TestBadInput and the yamlfile tests).
	for _, in := range []string{"{}\n", "rules:\nmigrations:\n", "rules: []\n", "{}\n---\n"} {
		p, err := ParsePolicy("policy.yaml", []byte(in))
		require.NoError(t, err, "%q", in)
		assert.Empty(t, p.Rules, "%q", in)
		assert.Empty(t, p.Migrations, "%q", in)
	}
	for _, in := range []string{"", "\n", "# nothing\n", "---\n", "null\n"} {
		_, err := ParsePolicy("policy.yaml", []byte(in))
		require.ErrorIs(t, err, outcome.ErrBadInput, "%q", in)
		assert.EqualError(t, err, "policy.yaml: empty policy file (want rules, migrations or both; {} is a policy without rules)", "%q", in)
	}
	_, err := ParsePolicy("policy.yaml", []byte("a: 1\n---\n"))
	require.ErrorContains(t, err, "policy.yaml:1: a: unknown field")
	// A trailing empty document is not a second document.
	p, err := ParsePolicy("policy.yaml", doc(`rules: [{path: a, policy: chart}]`, `---`))
	require.NoError(t, err)
	assert.Len(t, p.Rules, 1)
}

// The head and first chart of the specs of the tests: lines 1-5.
const (
	specHead = "apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:"
	target1  = "- target: {kind: ManagedChart, namespace: fleet-local, name: harvester}"
	chart1   = "  chart: {name: harvester, source: /charts}"
)

func TestBadInput(t *testing.T) {
	tests := []struct {
		name   string
		spec   bool // parse as an upgrade spec, else as a policy file
		in     []byte
		prefix string // file:line: field:
		frag   string
	}{
		// Policy files.
		{"unknown policy", false, doc(
			`rules:`,
			`- {path: a, policy: chart}`,
			`- path: b`,
			`  policy: prefer-magic`),
			`policy.yaml:4: rules[2].policy: `, `unknown policy "prefer-magic" (want one of user, chart,`},
		{"unknown top-level field", false, doc(`rules: []`, `apiVersion: v1`),
			`policy.yaml:2: apiVersion: `, `unknown field (want one of rules, migrations)`},
		{"unknown rule field", false, doc(`rules:`, `- path: a`, `  polcy: chart`),
			`policy.yaml:3: rules[1].polcy: `, `unknown field (want one of path, policy, source, expr, unless)`},
		{"unknown field with special characters", false, doc(`rules:`, `- {path: a, policy: chart, "a.b": 1}`),
			`policy.yaml:2: rules[1]["a.b"]: `, `unknown field`},
		{"unknown source field", false, doc(
			`rules:`,
			`- path: a`,
			`  policy: live`,
			`  source: {apiVersion: v1, kind: ConfigMap, namespce: x, name: y}`,
			`  expr: .data.a`),
			`policy.yaml:4: rules[1].source.namespce: `, `unknown field`},
		{"unknown migration field", false, doc(`migrations:`, `- {name: a, expr: .a, form: "<1"}`),
			`policy.yaml:2: migrations[1].form: `, `unknown field (want one of name, from, to, expr)`},
		{"rules is a map", false, doc(`rules:`, `  a: chart`),
			`policy.yaml:2: rules: `, `want a list, not a map`},
		{"rule is a string", false, doc(`rules:`, `- a.b`),
			`policy.yaml:2: rules[1]: `, `want a map, not a string`},
		{"path is a list", false, doc(`rules:`, `- path: [a, b]`, `  policy: chart`),
			`policy.yaml:2: rules[1].path: `, `want a string, not a list`},
		{"policy is a bool", false, doc(`rules:`, `- {path: a, policy: true}`),
			`policy.yaml:2: rules[1].policy: `, `want a string, not a bool`},
		{"missing path", false, doc(`rules:`, `- {path: a, policy: chart}`, `- policy: chart`),
			`policy.yaml:3: rules[2]: `, `missing required field "path"`},
		{"missing policy", false, doc(`rules:`, `- path: a`),
			`policy.yaml:2: rules[1]: `, `missing required field "policy"`},
		{"null path", false, doc(`rules:`, `- policy: chart`, `  path:`),
			`policy.yaml:3: rules[1].path: `, `missing a value`},
		{"empty policy", false, doc(`rules:`, `- {path: a, policy: ""}`),
			`policy.yaml:2: rules[1].policy: `, `must not be empty`},
		{"bad path pattern", false, doc(`rules:`, `- {path: "a..b", policy: chart}`),
			`policy.yaml:2: rules[1].path: `, `path "a..b" at offset`},
		{"live without source", false, doc(`rules:`, `- path: a.b`, `  policy: live`, `  expr: .x`),
			`policy.yaml:2: rules[1]: `, `policy live needs a source object`},
		{"live on a pattern", false, doc(
			`rules:`,
			`- path: a.*`,
			`  policy: live`,
			`  source: {apiVersion: v1, kind: ConfigMap, name: y}`,
			`  expr: .data.a`),
			`policy.yaml:2: rules[1]: `, `needs a concrete path`},
		{"chart with expr", false, doc(`rules:`, `- {path: a, policy: chart, expr: .a}`),
			`policy.yaml:2: rules[1]: `, `policy chart takes no expr`},
		{"source without name", false, doc(
			`rules:`,
			`- path: a`,
			`  policy: once`,
			`  source: {apiVersion: v1, kind: Secret}`,
			`  expr: .data.a`),
			`policy.yaml:4: rules[1].source: `, `missing required field "name"`},
		{"expr does not parse", false, doc(
			`rules:`,
			`- path: a`,
			`  policy: live`,
			`  source: {apiVersion: v1, kind: ConfigMap, name: y}`,
			`  expr: '.data[[['`),
			`policy.yaml:5: rules[1].expr: `, `does not parse`},
		{"bad from constraint", false, doc(`migrations:`, `- name: a`, `  from: "<<1.x!"`, `  expr: .a`),
			`policy.yaml:3: migrations[1].from: `, `bad version constraint "<<1.x!"`},
		{"bad to constraint", false, doc(`migrations:`, `- {name: a, to: "banana", expr: .a}`),
			`policy.yaml:2: migrations[1].to: `, `bad version constraint "banana"`},
		{"migration without expr", false, doc(`migrations:`, `- name: a`, `  from: "<1.0.0"`),
			`policy.yaml:2: migrations[1]: `, `missing required field "expr"`},
		{"migration without name", false, doc(`migrations:`, `- {expr: .a}`),
			`policy.yaml:2: migrations[1]: `, `missing required field "name"`},
		{"migration expr does not parse", false, doc(`migrations:`, `- {name: a, expr: 'del(.a'}`),
			`policy.yaml:2: migrations[1].expr: `, `does not parse`},
		{"duplicate migration names", false, doc(
			`migrations:`,
			`- {name: a, expr: .a}`,
			`- {name: b, expr: .b}`,
			`- {name: a, expr: .c}`),
			`policy.yaml:4: migrations[3].name: `, `duplicate migration name "a" (also migrations[1], line 2)`},
		{"duplicate field", false, doc(`rules:`, `- path: a`, `  policy: chart`, `  policy: user`),
			`policy.yaml:4: rules[1].policy: `, `duplicate field (first at line 3)`},
		{"merge key", false, doc(`base: &b {policy: chart}`, `rules:`, `- <<: *b`, `  path: a`),
			`policy.yaml:1: base: `, `unknown field`},
		{"merge key in a rule", false, doc(`rules:`, `- <<: {policy: chart}`, `  path: a`),
			`policy.yaml:2: rules[1]: `, `merge keys (<<) are not supported`},
		{"root is a list", false, doc(`- path: a`, `  policy: chart`),
			`policy.yaml:1: `, `want a map, not a list`},
		{"invalid YAML", false, doc(`rules:`, `- path: a`, `  policy: chart: x`),
			`policy.yaml:3: `, `invalid YAML: mapping values are not allowed`},
		{"tab indentation", false, doc(`rules:`, "\t- {path: a, policy: chart}"),
			`policy.yaml:2: `, `invalid YAML: found character that cannot start any token`},
		{"two documents", false, doc(`rules: []`, `---`, `migrations: []`),
			`policy.yaml:2: `, `a second YAML document`},
		{"unknown anchor", false, doc(`rules: *nope`),
			`policy.yaml: `, `invalid YAML: unknown anchor 'nope' referenced`},

		// Upgrade specs.
		{"empty spec", true, nil,
			`spec.yaml: `, `empty upgrade spec`},
		{"missing apiVersion", true, doc(`kind: UpgradeSpec`, `charts: []`),
			`spec.yaml:1: `, `missing required field "apiVersion"`},
		{"wrong apiVersion", true, doc(`apiVersion: chart-upgrader.io/v1`, `kind: UpgradeSpec`),
			`spec.yaml:1: apiVersion: `, `unsupported apiVersion "chart-upgrader.io/v1" (want chart-upgrader.io/v1alpha1)`},
		{"wrong kind", true, doc(`apiVersion: chart-upgrader.io/v1alpha1`, `kind: Policy`, `rules: []`),
			`spec.yaml:2: kind: `, `unsupported kind "Policy" (want UpgradeSpec)`},
		{"a policy file as spec", true, doc(`rules: []`),
			`spec.yaml:1: `, `missing required field "apiVersion"`},
		{"missing charts", true, doc(`apiVersion: chart-upgrader.io/v1alpha1`, `kind: UpgradeSpec`),
			`spec.yaml:1: `, `missing required field "charts"`},
		{"no charts", true, doc(`apiVersion: chart-upgrader.io/v1alpha1`, `kind: UpgradeSpec`, `charts: []`),
			`spec.yaml:3: charts: `, `no charts listed`},
		{"charts is a map", true, doc(specHead, `  harvester: {}`),
			`spec.yaml:4: charts: `, `want a list, not a map`},
		{"unknown chart field", true, doc(specHead, target1, chart1, `  waitt: {timeout: 1m}`),
			`spec.yaml:6: charts[1].waitt: `, `unknown field (want one of target, chart, rules, migrations, wait, apply, images, helmchart, release)`},
		{"images.check not a bool", true, doc(specHead, target1, chart1, `  images: {check: maybe}`),
			`spec.yaml:6: charts[1].images.check: `, `want true or false`},
		{"unknown images field", true, doc(specHead, target1, chart1, `  images: {skip: true}`),
			`spec.yaml:6: charts[1].images.skip: `, `unknown field (want one of check, discover, values)`},
		{"images.values a wildcard", true, doc(specHead, target1, chart1, `  images:`, `    values: [{repository: "a.*.repository", tag: a.b.tag}]`),
			`spec.yaml:7: charts[1].images.values[1].repository: `, `has a wildcard`},
		{"images.values a bad path", true, doc(specHead, target1, chart1, `  images:`, `    values: [{image: "a..b"}]`),
			`spec.yaml:7: charts[1].images.values[1].image: `, `empty`},
		{"images.values neither image nor repository", true, doc(specHead, target1, chart1, `  images:`, `    values: [{tag: a.tag}]`),
			`spec.yaml:7: charts[1].images.values[1]: `, `want image (the path of a whole reference) or repository`},
		{"images.values image with pieces", true, doc(specHead, target1, chart1, `  images:`, `    values: [{image: a.image, tag: a.tag}]`),
			`spec.yaml:7: charts[1].images.values[1]: `, `give it alone`},
		{"unless on a once rule", false, doc(`rules:`, `- path: a`, `  policy: once`, `  source: {apiVersion: v1, kind: Secret, namespace: x, name: y}`, `  expr: .data`, `  unless: {equals: x, then: y}`),
			`policy.yaml:6: rules[1].unless: `, `only a live rule takes unless, not a once rule`},
		{"unless without equals", false, doc(`rules:`, `- path: a`, `  policy: live`, `  source: {apiVersion: v1, kind: ConfigMap, namespace: x, name: y}`, `  expr: .data.a`, `  unless: {then: y}`),
			`policy.yaml:6: rules[1].unless: `, `missing required field "equals"`},
		{"unless with both then and thenDefault", false, doc(`rules:`, `- path: a`, `  policy: live`, `  source: {apiVersion: v1, kind: ConfigMap, namespace: x, name: y}`, `  expr: .data.a`, `  unless: {equals: x, then: y, thenDefault: true}`),
			`policy.yaml:6: rules[1].unless: `, `one of the two`},
		{"unless with an unknown field", false, doc(`rules:`, `- path: a`, `  policy: live`, `  source: {apiVersion: v1, kind: ConfigMap, namespace: x, name: y}`, `  expr: .data.a`, `  unless: {equals: x, otherwise: y}`),
			`policy.yaml:6: rules[1].unless.otherwise: `, `unknown field (want one of equals, then, thenDefault)`},
		{"unless equals a map", false, doc(`rules:`, `- path: a`, `  policy: live`, `  source: {apiVersion: v1, kind: ConfigMap, namespace: x, name: y}`, `  expr: .data.a`, `  unless: {equals: {a: b}, then: y}`),
			`policy.yaml:6: rules[1].unless.equals: `, `want the live value to replace`},
		{"health gate unknown field", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: kubevirt.io/v1, kind: KubeVirt, current: "true", ready: "true"}`),
			`spec.yaml:8: charts[1].wait.health[1].ready: `, `unknown field (want one of apiVersion, kind, namespace, selector, minCount, filter, each, current, failed, inProgress)`},
		{"health gate CEL that does not compile", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - apiVersion: kubevirt.io/v1`, `      kind: KubeVirt`, `      current: "status.phase =="`),
			`spec.yaml:10: charts[1].wait.health[1].current: `, `the CEL expression "status.phase ==" does not compile`},
		{"health gate CEL with an unknown variable", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - apiVersion: kubevirt.io/v1`, `      kind: KubeVirt`, `      current: "true"`, `      failed: "object.status.phase == 'Failed'"`),
			`spec.yaml:11: charts[1].wait.health[1].failed: `, `undeclared reference to 'object'`},
		{"health gate CEL not a bool", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: v1, kind: Pod, namespace: x, current: "1", inProgress: "true"}`),
			`spec.yaml:8: charts[1].wait.health[1].current: `, `not a bool`},
		{"health gate without current", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: kubevirt.io/v1, kind: KubeVirt}`),
			`spec.yaml:8: charts[1].wait.health[1]: `, `missing required field "current"`},
		{"health gate selector that does not parse", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: longhorn.io/v1beta2, kind: InstanceManager, namespace: longhorn-system, selector: "a in (b", current: "true"}`),
			`spec.yaml:8: charts[1].wait.health[1].selector: `, `bad label selector "a in (b"`},
		{"health gate minCount negative", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: v1, kind: Pod, namespace: x, minCount: -1, current: "true"}`),
			`spec.yaml:8: charts[1].wait.health[1].minCount: `, `want a whole number, 0 or more`},
		{"health gate bad apiVersion", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: "a/b/c", kind: Pod, current: "true"}`),
			`spec.yaml:8: charts[1].wait.health[1].apiVersion: `, `want GROUP/VERSION (kubevirt.io/v1) or v1, not "a/b/c"`},
		{"health gate bad kind", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: v1, kind: pod, current: "true"}`),
			`spec.yaml:8: charts[1].wait.health[1].kind: `, `want a kind as manifests spell it (KubeVirt), not "pod"`},
		{"health gate bad namespace", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: v1, kind: Pod, namespace: Kube_System, current: "true"}`),
			`spec.yaml:8: charts[1].wait.health[1].namespace: `, `namespace "Kube_System" is not a valid namespace`},
		{"health gate twice", true, doc(specHead, target1, chart1, `  wait:`, `    health:`, `    - {apiVersion: v1, kind: Pod, namespace: x, current: "true"}`, `    - {apiVersion: v1, kind: Pod, namespace: x, current: "false"}`),
			`spec.yaml:9: charts[1].wait.health[2]: `, `the same gate as charts[1].wait.health[1] (line 8): Pod v1 in x`},
		{"health not a list", true, doc(specHead, target1, chart1, `  wait: {health: {kind: Pod}}`),
			`spec.yaml:6: charts[1].wait.health: `, `want a list, not a map`},
		{"missing target", true, doc(specHead, `- chart: {name: harvester, source: /charts}`),
			`spec.yaml:4: charts[1]: `, `missing required field "target"`},
		{"unsupported target kind", true, doc(specHead, `- target: {kind: FleetBundle, namespace: kube-system, name: x}`, chart1),
			`spec.yaml:4: charts[1].target.kind: `, `unsupported kind "FleetBundle" (want ManagedChart, HelmChart or Release)`},
		{"release options on a ManagedChart", true, doc(specHead, target1, chart1, `  release: {rollbackOnFailure: false}`),
			`spec.yaml:6: charts[1].release: `, `only a target of kind Release takes release options (this one is a ManagedChart)`},
		{"release historyMax negative", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  release: {historyMax: -1}`),
			`spec.yaml:6: charts[1].release.historyMax: `, `want a whole number ≥ 0`},
		{"release rollbackOnFailure a string", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  release: {rollbackOnFailure: "yes"}`),
			`spec.yaml:6: charts[1].release.rollbackOnFailure: `, `want true or false`},
		{"release unknown option", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  release: {wait: true}`),
			`spec.yaml:6: charts[1].release.wait: `, `unknown field (want one of rollbackOnFailure, historyMax, recoverPending, mapRemovedAPIs)`},
		{"release recoverPending a bad duration", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  release: {recoverPending: {after: soon}}`),
			`spec.yaml:6: charts[1].release.recoverPending.after: `, `want a positive duration such as 1h or 30m, not "soon"`},
		{"release recoverPending of zero", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  release: {recoverPending: {after: 0s}}`),
			`spec.yaml:6: charts[1].release.recoverPending.after: `, `want a positive duration such as 1h or 30m, not "0s"`},
		{"release recoverPending without after", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  release: {recoverPending: {}}`),
			`spec.yaml:6: charts[1].release.recoverPending: `, `want after: DURATION`},
		{"release recoverPending on a HelmChart", true, doc(specHead, `- target: {kind: HelmChart, namespace: kube-system, name: app}`, chart1, `  release: {recoverPending: {after: 1h}}`),
			`spec.yaml:6: charts[1].release: `, `only a target of kind Release takes release options (this one is a HelmChart)`},
		{"apply serverSide not one of three", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {serverSide: yes}`),
			`spec.yaml:6: charts[1].apply.serverSide: `, `want auto, true or false, not "yes"`},
		{"apply forceConflicts not a bool", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {forceConflicts: 1}`),
			`spec.yaml:6: charts[1].apply.forceConflicts: `, `want true or false`},
		{"apply unknown field", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {force: true}`),
			`spec.yaml:6: charts[1].apply.force: `, `unknown field (want one of serverSide, forceConflicts, unchecked, recreate, crds)`},
		{"apply crds an unknown word", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {crds: replace}`),
			`spec.yaml:6: charts[1].apply.crds: `, `want skip, create, createReplace, not "replace"`},
		{"apply crds in another case", true, doc(specHead, target1, chart1, `  apply: {crds: CreateReplace}`),
			`spec.yaml:6: charts[1].apply.crds: `, `want skip, create, createReplace, not "CreateReplace"`},
		{"apply crds a list", true, doc(specHead, target1, chart1, `  apply: {crds: [createReplace]}`),
			`spec.yaml:6: charts[1].apply.crds: `, `want skip, create, createReplace, not a list`},
		{"apply crds migrate without createReplace", true, doc(specHead, target1, chart1, `  apply: {crds: {policy: create, migrate: true}}`),
			`spec.yaml:6: charts[1].apply.crds: `, `migrate: true needs policy: createReplace`},
		{"apply crds without a policy", true, doc(specHead, target1, chart1, `  apply: {crds: {migrate: true}}`),
			`spec.yaml:6: charts[1].apply.crds: `, `want policy: skip, create or createReplace`},
		{"apply crds migrate not a bool", true, doc(specHead, target1, chart1, `  apply: {crds: {policy: createReplace, migrate: maybe}}`),
			`spec.yaml:6: charts[1].apply.crds.migrate: `, `want true or false`},
		{"apply crds an unknown field", true, doc(specHead, target1, chart1, `  apply: {crds: {policy: createReplace, prune: true}}`),
			`spec.yaml:6: charts[1].apply.crds.prune: `, `unknown field (want one of policy, migrate)`},
		{"apply unchecked not refuse or warn", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {unchecked: ignore}`),
			`spec.yaml:6: charts[1].apply.unchecked: `, `want refuse or warn, not`},
		{"apply recreate not a list", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {recreate: StatefulSet/db}`),
			`spec.yaml:6: charts[1].apply.recreate: `, `want a list`},
		{"apply recreate a kind in lower case", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {recreate: [statefulset/db]}`),
			`spec.yaml:6: charts[1].apply.recreate[1]: `, `want KIND/NAME or KIND/NAMESPACE/NAME, the kind as the chart's manifest names it (StatefulSet/db), not "statefulset/db"`},
		{"apply recreate without a name", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {recreate: [StatefulSet]}`),
			`spec.yaml:6: charts[1].apply.recreate[1]: `, `want KIND/NAME or KIND/NAMESPACE/NAME`},
		{"apply recreate twice", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {recreate: [StatefulSet/db, StatefulSet/db]}`),
			`spec.yaml:6: charts[1].apply.recreate[2]: `, `StatefulSet/db is listed twice`},
		{"apply unchecked a boolean", true, doc(specHead, target1, chart1, `  apply: {unchecked: true}`),
			`spec.yaml:6: charts[1].apply.unchecked: `, `want refuse or warn, not`},
		{"apply forceConflicts client-side", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, chart1, `  apply: {serverSide: false, forceConflicts: true}`),
			`spec.yaml:6: charts[1].apply: `, `forceConflicts: true needs server-side apply, and serverSide is false`},
		{"apply forceConflicts on a ManagedChart", true, doc(specHead, target1, chart1, `  apply: {forceConflicts: true}`),
			`spec.yaml:6: charts[1].apply.forceConflicts: `, `a ManagedChart cannot force conflicts: Fleet v0.16 has no option to force field-manager conflicts`},
		{"apply serverSide on a ManagedChart", true, doc(specHead, target1, chart1, `  apply: {serverSide: true}`),
			`spec.yaml:6: charts[1].apply.serverSide: `, `a ManagedChart takes only auto: Fleet's agent decides`},
		{"release without a chart source", true, doc(specHead, `- target: {kind: Release, namespace: demo, name: app}`, `  chart: {name: app}`),
			`spec.yaml:5: charts[1].chart: `, `missing required field "source"`},
		{"managedchart without chart", true, doc(specHead, target1),
			`spec.yaml:4: charts[1]: `, `missing required field "chart"`},
		{"helmchart chart source not a string", true, doc(specHead, `- target: {kind: HelmChart, namespace: kube-system, name: x}`, `  chart: {source: [a]}`),
			`spec.yaml:5: charts[1].chart.source: `, `want a string, not a list`},
		{"helmchart chart source bad URL", true, doc(specHead, `- target: {kind: HelmChart, namespace: kube-system, name: x}`, `  chart: {source: "ftp://x"}`),
			`spec.yaml:5: charts[1].chart.source: `, `unsupported source "ftp://x"`},
		{"missing target namespace", true, doc(specHead, `- target: {kind: ManagedChart, name: x}`, chart1),
			`spec.yaml:4: charts[1].target: `, `missing required field "namespace"`},
		{"bad target namespace", true, doc(specHead, `- target: {kind: ManagedChart, namespace: Fleet_Local, name: x}`, chart1),
			`spec.yaml:4: charts[1].target.namespace: `, `namespace "Fleet_Local" is not a valid namespace`},
		{"target name is a list", true, doc(specHead, `- target: {kind: ManagedChart, namespace: a, name: [x]}`, chart1),
			`spec.yaml:4: charts[1].target.name: `, `want a string, not a list`},
		{"missing chart source", true, doc(specHead, target1, `  chart: {name: harvester}`),
			`spec.yaml:5: charts[1].chart: `, `missing required field "source"`},
		{"unsupported source scheme", true, doc(specHead, target1, `  chart: {name: harvester, source: "ftp://x/charts"}`),
			`spec.yaml:5: charts[1].chart.source: `, `unsupported source "ftp://x/charts"`},
		{"bad duration", true, doc(specHead, target1, chart1, `  wait: {timeout: 20 minutes}`),
			`spec.yaml:6: charts[1].wait.timeout: `, `want a positive duration such as 20m or 1h30m, not "20 minutes"`},
		{"duration without unit", true, doc(specHead, target1, chart1, `  wait:`, `    timeout: 600`),
			`spec.yaml:7: charts[1].wait.timeout: `, `want a positive duration such as 20m or 1h30m, not a number (600)`},
		{"negative duration", true, doc(specHead, target1, chart1, `  wait: {timeout: -5m}`),
			`spec.yaml:6: charts[1].wait.timeout: `, `want a positive duration such as 20m or 1h30m, not "-5m"`},
		{"bad grace", true, doc(specHead, target1, chart1, `  wait: {errAppliedGrace: forever}`),
			`spec.yaml:6: charts[1].wait.errAppliedGrace: `, `want a positive duration such as 60s or 5m, not "forever"`},
		{"zero grace", true, doc(specHead, target1, chart1, `  wait: {errAppliedGrace: 0s}`),
			`spec.yaml:6: charts[1].wait.errAppliedGrace: `, `want a positive duration such as 60s or 5m`},
		{"unknown wait field", true, doc(specHead, target1, chart1, `  wait: {grace: 1m}`),
			`spec.yaml:6: charts[1].wait`, `grace`},
		{"duplicate target", true, doc(specHead, target1, chart1,
			`- target: {kind: managedChart, namespace: fleet-local, name: harvester}`, chart1),
			`spec.yaml:6: charts[2].target: `, `duplicate target managedchart/fleet-local/harvester (also charts[1], line 4)`},
		{"rule error in a spec", true, doc(specHead, target1, chart1, `  rules:`, `  - {path: a, policy: chart}`, `  - {path: b, policy: prefer-magic}`),
			`spec.yaml:8: charts[1].rules[2].policy: `, `unknown policy "prefer-magic"`},
		{"migration error in a spec", true, doc(specHead, target1, chart1, `  migrations:`, `  - {name: m, from: "~>", expr: .a}`),
			`spec.yaml:7: charts[1].migrations[1].from: `, `bad version constraint`},
		{"invalid YAML in a spec", true, doc(specHead, target1, `  chart: {name: harvester, source: /charts`),
			`spec.yaml:`, `invalid YAML: did not find expected ',' or '}'`},
		{"second document in a spec", true, doc(specHead, target1, chart1, `---`, `kind: UpgradeSpec`),
			`spec.yaml:6: `, `a second YAML document`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.spec {
				_, err = ParseSpec("spec.yaml", tt.in, kinds)
			} else {
				_, err = ParsePolicy("policy.yaml", tt.in)
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, outcome.ErrBadInput), "not bad input: %v", err)
			assert.Equal(t, outcome.ExitBadInput, outcome.Code(err))
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, tt.prefix), "want prefix %q, got %q", tt.prefix, msg)
			assert.Contains(t, msg, tt.frag)
			assert.Equal(t, strings.ToLower(msg[:1]), msg[:1])
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yaml")
	require.NoError(t, os.WriteFile(specPath, designSpec, 0o600))
	s, err := LoadSpec(specPath, kinds)
	require.NoError(t, err)
	assert.Equal(t, specPath, s.File)
	assert.Len(t, s.Charts, 2)

	policyPath := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policyPath, doc(`rules:`, `- {path: a, policy: bogus}`), 0o600))
	_, err = LoadPolicy(policyPath)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), policyPath+":2: rules[1].policy: "), err.Error())

	missing := filepath.Join(dir, "missing.yaml")
	_, err = LoadSpec(missing, kinds)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
	_, err = LoadPolicy(missing)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.Contains(t, err.Error(), missing)
}

func TestParseTarget(t *testing.T) {
	good := map[string]Target{
		"managedchart/fleet-local/harvester":              {"managedchart", "fleet-local", "harvester"},
		"ManagedChart/fleet-local/rancher-monitoring-crd": {"managedchart", "fleet-local", "rancher-monitoring-crd"},
		"MANAGEDCHART/a/b.c":                              {"managedchart", "a", "b.c"},
	}
	for in, want := range good {
		got, err := ParseTarget(in, kinds)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
		assert.Equal(t, strings.ToLower(in), got.String())
	}
	bad := map[string]string{
		"":                            `want KIND/NAMESPACE/NAME`,
		"harvester":                   `want KIND/NAMESPACE/NAME`,
		"fleet-local/harvester":       `want KIND/NAMESPACE/NAME`,
		"managedchart/a/b/c":          `want KIND/NAMESPACE/NAME`,
		"fleetbundle/kube-system/x":   `unsupported kind "fleetbundle" (want ManagedChart, HelmChart or Release)`,
		"managedchart//harvester":     `namespace "" is not a valid namespace`,
		"managedchart/Fleet/x":        `namespace "Fleet" is not a valid namespace`,
		"managedchart/fleet-local/":   `name "" is not a valid object name`,
		"managedchart/fleet-local/X_": `name "X_" is not a valid object name`,
	}
	for in, frag := range bad {
		_, err := ParseTarget(in, kinds)
		require.ErrorIs(t, err, outcome.ErrBadInput, in)
		assert.Contains(t, err.Error(), `target "`+in+`": `+frag)
	}
}

// A HelmChart names its chart and source itself (spec.chart, spec.repo):
// the spec may leave chart out, or give only a source.
func TestHelmChartMayLeaveTheChartOut(t *testing.T) {
	sp, err := ParseSpec("spec.yaml", []byte(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: HelmChart, namespace: kube-system, name: traefik}
- target: {kind: helmchart, namespace: kube-system, name: app}
  chart: {source: /charts}
`), kinds)
	require.NoError(t, err)
	require.Len(t, sp.Charts, 2)
	assert.Equal(t, "helmchart", sp.Charts[0].Target.Kind)
	assert.Equal(t, ChartRef{}, sp.Charts[0].Chart)
	assert.Equal(t, ChartRef{Source: "/charts"}, sp.Charts[1].Chart)
}

func TestReleaseOptions(t *testing.T) {
	sp, err := ParseSpec("spec.yaml", []byte(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: Release, namespace: demo, name: app}
  chart: {name: app, source: "oci://registry.example.com/charts"}
  release: {rollbackOnFailure: false, historyMax: 0, recoverPending: {after: 90m}}
- target: {kind: Release, namespace: demo, name: other}
  chart: {name: app, source: /charts}
`), kinds)
	require.NoError(t, err)
	assert.Equal(t, plainrelease.Options{RollbackOnFailure: false, HistoryMax: 0, RecoverPendingAfter: 90 * time.Minute}, sp.Charts[0].Options)
	assert.Equal(t, plainrelease.DefaultOptions, sp.Charts[1].Options)
	assert.Equal(t, "oci://registry.example.com/charts", sp.Charts[0].Chart.Source)
}

// apply: is read per chart, with its defaults when left out; serverSide
// takes the YAML booleans as well as the strings.
func TestApplySettings(t *testing.T) {
	sp, err := ParseSpec("spec.yaml", []byte(`apiVersion: chart-upgrader.io/v1alpha1
kind: UpgradeSpec
charts:
- target: {kind: Release, namespace: demo, name: a}
  chart: {name: a, source: /charts}
  apply: {serverSide: true, forceConflicts: true}
- target: {kind: Release, namespace: demo, name: b}
  chart: {name: b, source: /charts}
  apply: {serverSide: "false"}
- target: {kind: HelmChart, namespace: kube-system, name: c}
  apply: {forceConflicts: true}
- target: {kind: ManagedChart, namespace: fleet-local, name: d}
  chart: {name: d, source: /charts}
- target: {kind: ManagedChart, namespace: fleet-local, name: e}
  chart: {name: e, source: /charts}
  apply: {unchecked: warn}
- target: {kind: Release, namespace: demo, name: f}
  chart: {name: f, source: /charts}
  apply: {unchecked: refuse, recreate: [StatefulSet/db, Deployment/other-ns/web]}
- target: {kind: HelmChart, namespace: kube-system, name: g}
  apply: {crds: createReplace}
- target: {kind: ManagedChart, namespace: fleet-local, name: h}
  chart: {name: h, source: /charts}
  apply: {crds: create}
- target: {kind: Release, namespace: demo, name: i}
  chart: {name: i, source: /charts}
  apply: {crds: skip}
- target: {kind: Release, namespace: demo, name: j}
  chart: {name: j, source: /charts}
  apply: {crds: {policy: createReplace, migrate: true}}
`), kinds)
	require.NoError(t, err)
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideTrue, ForceConflicts: true}, sp.Charts[0].Apply)
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideFalse}, sp.Charts[1].Apply)
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideAuto, ForceConflicts: true}, sp.Charts[2].Apply)
	assert.Equal(t, kind.DefaultApply, sp.Charts[3].Apply)
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideAuto, WarnUnchecked: true}, sp.Charts[4].Apply, "a ManagedChart takes unchecked")
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideAuto, Recreate: []string{"StatefulSet/db", "Deployment/other-ns/web"}}, sp.Charts[5].Apply)
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideAuto, CRDs: "createReplace"}, sp.Charts[6].Apply, "every kind takes crds")
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideAuto, CRDs: "create"}, sp.Charts[7].Apply)
	assert.Equal(t, kind.DefaultApply, sp.Charts[8].Apply, "skip is the default")
	assert.Equal(t, kind.Apply{ServerSide: kind.ServerSideAuto, CRDs: "createReplace", MigrateCRDs: true}, sp.Charts[9].Apply)
}

func TestParseUnless(t *testing.T) {
	p, err := ParsePolicy("policy.yaml", doc(`rules:`,
		`- path: longhorn.defaultSettings.nodeDrainPolicy`,
		`  policy: live`,
		`  source: {apiVersion: longhorn.io/v1beta2, kind: Setting, namespace: longhorn-system, name: node-drain-policy}`,
		`  expr: .value`,
		`  unless: {equals: block-if-contains-last-replica, then: allow-if-replica-is-stopped}`,
		`- path: longhorn.defaultSettings.detachManuallyAttachedVolumesWhenCordoned`,
		`  policy: live`,
		`  source: {apiVersion: longhorn.io/v1beta2, kind: Setting, namespace: longhorn-system, name: detach-manually-attached-volumes-when-cordoned}`,
		`  expr: '.value == "true"'`,
		`  unless: {equals: false, thenDefault: true}`))
	require.NoError(t, err)
	require.Len(t, p.Rules, 2)
	assert.Equal(t, &values.Unless{Equals: "block-if-contains-last-replica", Then: "allow-if-replica-is-stopped"}, p.Rules[0].Unless)
	assert.Equal(t, &values.Unless{Equals: false, ThenDefault: true}, p.Rules[1].Unless)
}

// The Harvester policy of package/examples parses, with the rules of the
// Harvester spec in plans/20-spec-secret.yaml.
func TestHarvesterPolicyExample(t *testing.T) {
	p, err := LoadPolicy(filepath.Join("..", "..", "package", "examples", "harvester-policy.yaml"))
	require.NoError(t, err)
	var unless int
	for _, r := range p.Rules {
		if r.Unless != nil {
			unless++
		}
	}
	assert.Equal(t, 2, unless, "Longhorn's two settings, as Harvester's script moves them")
	assert.Len(t, p.Migrations, 1)
}

// images: checked and discovered by default; check: false skips them;
// values name the images operators run, whole or in pieces.
func TestParseSpecImages(t *testing.T) {
	s, err := ParseSpec("spec.yaml", doc(specHead, target1, chart1), kinds)
	require.NoError(t, err)
	assert.Equal(t, Images{Discover: true}, s.Charts[0].Images)
	s, err = ParseSpec("spec.yaml", doc(specHead, target1, chart1,
		`  images:`,
		`    check: false`,
		`    discover: false`,
		`    values:`,
		`    - {repository: longhorn.image.longhorn.instanceManager.repository, tag: longhorn.image.longhorn.instanceManager.tag}`,
		`    - image: 'kubevirt["virt-launcher"].image'`), kinds)
	require.NoError(t, err)
	im := s.Charts[0].Images
	assert.True(t, im.Skip)
	assert.False(t, im.Discover)
	require.Len(t, im.Values, 2)
	assert.Equal(t, ImageValue{Repository: "longhorn.image.longhorn.instanceManager.repository", Tag: "longhorn.image.longhorn.instanceManager.tag",
		At: "spec.yaml:10: charts[1].images.values[1]"}, im.Values[0])
	assert.Equal(t, `kubevirt["virt-launcher"].image`, im.Values[1].Image)
}

// wait.podFailureGrace: 2m by default, 0 turns it off, anything else a
// positive duration.
func TestParseSpecPodFailureGrace(t *testing.T) {
	for in, want := range map[string]time.Duration{``: 2 * time.Minute, `  wait: {podFailureGrace: 0}`: 0, `  wait: {podFailureGrace: 30s}`: 30 * time.Second} {
		s, err := ParseSpec("spec.yaml", doc(specHead, target1, chart1, in), kinds)
		require.NoError(t, err, in)
		assert.Equal(t, want, s.Charts[0].Wait.PodFailureGrace, in)
	}
	for _, bad := range []string{`  wait: {podFailureGrace: -1m}`, `  wait: {podFailureGrace: soon}`, `  wait: {podFailureGrace: 5}`} {
		_, err := ParseSpec("spec.yaml", doc(specHead, target1, chart1, bad), kinds)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "spec.yaml:6: charts[1].wait.podFailureGrace: want a positive duration such as 2m or 30s (0: off)")
	}
}

// A gate's filter and each: compiled once; a key that is not a string, a
// filter that does not compile, a field each does not know are bad input.
func TestParseSpecGateFilterAndEach(t *testing.T) {
	gate := func(lines ...string) []byte {
		return doc(append([]string{specHead, target1, chart1, `  wait:`, `    health:`, `    - apiVersion: longhorn.io/v1beta2`,
			`      kind: InstanceManager`, `      namespace: longhorn-system`, `      current: "status.currentState == 'running'"`}, lines...)...)
	}
	s, err := ParseSpec("spec.yaml", gate(
		`      filter: "spec.image == values.image"`,
		`      each: {apiVersion: longhorn.io/v1beta2, kind: Node, namespace: longhorn-system, key: "metadata.labels['longhorn.io/node']"}`), kinds)
	require.NoError(t, err)
	g := s.Charts[0].Wait.Health[0]
	require.NotNil(t, g.Filter)
	require.NotNil(t, g.Each)
	assert.Equal(t, "Node", g.Each.Kind)
	assert.Equal(t, "InstanceManager longhorn.io/v1beta2 in longhorn-system, each Node longhorn.io/v1beta2 in longhorn-system", g.String())
	for _, c := range []struct{ line, want string }{
		{`      filter: "spec.image =="`, "charts[1].wait.health[1].filter: the CEL expression"},
		{`      filter: "spec.replicas + 1"`, "not a bool"},
		{`      each: {apiVersion: longhorn.io/v1beta2, kind: Node, key: "1 + 1"}`, "charts[1].wait.health[1].each.key: the CEL expression \"1 + 1\" does not compile to a string"},
		{`      each: {apiVersion: longhorn.io/v1beta2, kind: Node}`, `missing required field "key"`},
		{`      each: {apiVersion: longhorn.io/v1beta2, kind: node, key: metadata.name}`, "each.kind: want a kind as manifests spell it"},
		{`      each: {apiVersion: longhorn.io/v1beta2, kind: Node, key: metadata.name, minCount: 2}`, "each.minCount: unknown field"},
	} {
		_, err := ParseSpec("spec.yaml", gate(c.line), kinds)
		require.Error(t, err, c.line)
		assert.Contains(t, err.Error(), c.want, c.line)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
	}
}
