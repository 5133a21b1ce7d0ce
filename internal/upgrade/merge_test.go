package upgrade

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

var errBoom = errors.New("boom")

// MergeOnly merges for the target as it stands and writes nothing: no
// write, no Lease, no Event, no journal, no hook.
func TestMergeOnly(t *testing.T) {
	e := newEnv(t)
	res, err := e.runner.MergeOnly(e.ctx(), e.job)
	require.NoError(t, err)
	assert.Equal(t, vals(t, mergedValues), res.Values)
	assert.Equal(t, "1.0.0", res.From)
	assert.Equal(t, "2.0.0", res.To)
	assert.Zero(t, e.target.applyCalls)
	assert.Zero(t, e.target.backupCalls)
	assert.Zero(t, e.target.watchCalls)
	assert.Zero(t, e.target.healthCalls, "no check")
	assert.Empty(t, e.leases.historyCopy())
	assert.Zero(t, e.journal.saves)
	assert.Empty(t, e.hooks.callList())
	assert.Empty(t, e.out.String(), "the caller prints the result")
}

func TestMergeOnlyRefused(t *testing.T) {
	e := newEnv(t)
	e.job.Rules = append(e.job.Rules, rule(t, "readonly", "replicas"))
	e.job.Overrides = []values.Override{{Origin: "--set replicas=5", Values: map[string]any{"replicas": int64(5)}}}
	res, err := e.runner.MergeOnly(e.ctx(), e.job)
	require.ErrorIs(t, err, outcome.ErrRefused)
	require.NotNil(t, res, "the result of a refusal, for the report")
	assert.NotEmpty(t, res.Decisions)
	assert.Zero(t, e.target.applyCalls)
	assert.Contains(t, e.out.String(), "REFUSED")
}

func TestMergeOnlyErrors(t *testing.T) {
	e := newEnv(t)
	e.target.exists = false
	res, err := e.runner.MergeOnly(e.ctx(), e.job)
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.Nil(t, res)

	e = newEnv(t)
	e.cluster.setErr("Live", errBoom)
	res, err = e.runner.MergeOnly(e.ctx(), e.job)
	require.ErrorIs(t, err, errBoom)
	assert.Nil(t, res)
}

// A live rule reads its source object from the cluster, once per object.
func TestMergeLiveRule(t *testing.T) {
	e := newEnv(t)
	cm := values.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "kube-system", Name: "net"}
	expr, err := values.ParseExpr(".data.cidr")
	require.NoError(t, err)
	var rules []values.Rule
	for _, path := range []string{"cidr", "other"} {
		p, err := values.ParsePattern(path)
		require.NoError(t, err)
		r, err := values.NewRule(p, values.PolicyLive, &cm, expr)
		require.NoError(t, err)
		rules = append(rules, r)
	}
	e.job.Rules = append(e.job.Rules, rules...)
	e.cluster.live[cm] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "kube-system", "name": "net"}, "data": map[string]any{"cidr": "10.42.0.0/16"}}
	e.mustRun(GoalUpgrade)
	assert.Equal(t, "10.42.0.0/16", e.target.current().Values["cidr"])
	require.NotEmpty(t, e.cluster.liveRefs)
	assert.Equal(t, []values.ObjectRef{cm}, e.cluster.liveRefs[0], "each source once")
	assert.Len(t, e.cluster.liveRefs, 1, "merge reused preflight's merge")
}

func TestMergeGlobalWhenEmpty(t *testing.T) {
	chartNew, chartOld := appChart("2.0.0"), appChart("1.0.0")
	for _, c := range []*Chart{chartNew, chartOld} {
		c.Check = func(map[string]any) error { return nil }
	}
	dropAll := []values.Rule{rule(t, "chart", "**")}
	global := map[string]any{"global": map[string]any{}}
	globalHash := hashOf(t, global)

	// two callers whose user values all drop get the same values and hash
	for _, user := range []string{`{replicas: 3}`, `{image: {tag: "9"}, extra: [1, 2]}`} {
		res, err := Merge(MergeInputs{User: vals(t, user), New: chartNew, Old: chartOld, Rules: dropAll})
		require.NoError(t, err, user)
		assert.Equal(t, global, res.Values, user)
		assert.Equal(t, globalHash, res.SHA256, user)
		assert.Equal(t, "global: {}\n", string(res.YAML))
		require.NotEmpty(t, res.Warnings)
		assert.Equal(t, values.WarnPinned, res.Warnings[len(res.Warnings)-1].Kind)
		assert.Equal(t, "global", res.Warnings[len(res.Warnings)-1].Path)
	}

	// no user values to start with: empty stays empty
	res, err := Merge(MergeInputs{User: map[string]any{}, New: chartNew, Old: chartOld, Rules: dropAll})
	require.NoError(t, err)
	assert.Empty(t, res.Values)

	// a chart that does not take global: {} either
	chartNew.Check = func(v map[string]any) error {
		if _, ok := v["global"]; ok {
			return outcome.Refused(errors.New("values don't meet the schema: global: additional property not allowed"))
		}
		return nil
	}
	res, err = Merge(MergeInputs{User: vals(t, `{replicas: 3}`), New: chartNew, Old: chartOld, Rules: dropAll})
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.ErrorContains(t, err, "the merge leaves no user values, and Helm would then reuse the old ones; global: {} does not validate either: values don't meet the schema")
	require.NotNil(t, res, "the result, for the report")
	assert.Equal(t, global, res.Values)
}

func TestMergeCheckFails(t *testing.T) {
	chartNew := appChart("2.0.0")
	var checked map[string]any
	chartNew.Check = func(v map[string]any) error {
		checked = v
		return outcome.Refused(errors.New(`template: password "hunter22" is too short`))
	}
	res, err := Merge(MergeInputs{User: vals(t, `{replicas: 3, db: {password: hunter22}}`), New: chartNew})
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.ErrorContains(t, err, "chart app 2.0.0 with the merged values: template: password")
	assert.NotContains(t, err.Error(), "hunter22", "a secret the error quotes is scrubbed")
	require.NotNil(t, res)
	assert.Equal(t, res.Values, checked, "the chart is checked with the merged values")
}

func TestMergeVersions(t *testing.T) {
	chartNew, chartOld := appChart("2.0.0"), appChart("1.0.0")
	chartNew.Check = func(map[string]any) error { return nil }
	tests := []struct {
		name     string
		in       MergeInputs
		from, to string
	}{
		{"from the charts", MergeInputs{New: chartNew, Old: chartOld}, "1.0.0", "2.0.0"},
		{"given", MergeInputs{New: chartNew, Old: chartOld, FromVersion: "1.0.0-rke2r1", ToVersion: "2.0.0-rke2r1"}, "1.0.0-rke2r1", "2.0.0-rke2r1"},
		{"no old chart", MergeInputs{New: chartNew}, "", "2.0.0"},
		{"no old chart, a from version given", MergeInputs{New: chartNew, FromVersion: "0.9.0"}, "0.9.0", "2.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.User = vals(t, `{replicas: 3}`)
			res, err := Merge(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.from, res.From)
			assert.Equal(t, tt.to, res.To)
		})
	}

	// migrations match on those versions
	expr, err := values.ParseExpr(`.replicas = 7`)
	require.NoError(t, err)
	m, err := values.NewMigration("bump", "<2.0.0", ">=2.0.0", expr)
	require.NoError(t, err)
	res, err := Merge(MergeInputs{User: vals(t, `{replicas: 3}`), New: chartNew, Old: chartOld, Migrations: []values.Migration{m}})
	require.NoError(t, err)
	assert.Equal(t, int64(7), res.Values["replicas"], "1.0.0 → 2.0.0 from the charts runs the migration")
	res, err = Merge(MergeInputs{User: vals(t, `{replicas: 3}`), New: chartNew, Old: chartOld, Migrations: []values.Migration{m},
		FromVersion: "2.0.0"})
	require.NoError(t, err)
	assert.Equal(t, int64(3), res.Values["replicas"], "a from version given wins over the old chart's")
}

// A merge values.Merge refuses returns its result with the refusal, and
// Check is not asked.
func TestMergeReadonlyRefused(t *testing.T) {
	chartNew := appChart("2.0.0")
	chartNew.Check = func(map[string]any) error { t.Fatal("a refused merge is not checked"); return nil }
	res, err := Merge(MergeInputs{User: vals(t, `{replicas: 3}`), New: chartNew, Rules: []values.Rule{rule(t, "readonly", "replicas")},
		Overrides: []values.Override{{Origin: "--set replicas=5", Values: map[string]any{"replicas": int64(5)}}}})
	require.ErrorIs(t, err, outcome.ErrRefused)
	require.NotNil(t, res)
}

// Drift on an object a live rule reads does not stop the upgrade, which
// writes the live value; the report says so. Drift on any other object is
// refused, naming it and the change.
func TestPreflightWeighsDriftAgainstLiveRules(t *testing.T) {
	sc := values.ObjectRef{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: "longhorn"}
	other := values.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "settings"}
	liveEnv := func(t *testing.T) *env {
		e := newEnv(t)
		expr, err := values.ParseExpr(`.metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"`)
		require.NoError(t, err)
		p, err := values.ParsePattern("storageClass.default")
		require.NoError(t, err)
		r, err := values.NewRule(p, values.PolicyLive, &sc, expr)
		require.NoError(t, err)
		e.job.Rules = append(e.job.Rules, r)
		e.cluster.live[sc] = map[string]any{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
			"metadata": map[string]any{"name": "longhorn", "annotations": map[string]any{"storageclass.kubernetes.io/is-default-class": "false"}}}
		return e
	}
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"true"}}}`

	e := liveEnv(t)
	e.target.health = Health{Drift: []Drift{{Object: sc, Patch: patch}}}
	e.mustRun(GoalUpgrade)
	assert.Equal(t, false, e.target.current().Values["storageClass"].(map[string]any)["default"], "the live value is written")
	out := e.out.String()
	assert.Contains(t, out, "drift-owned-by-live-rule")
	assert.Contains(t, out, "storage.k8s.io/v1 StorageClass/longhorn was changed in the cluster")

	e = liveEnv(t)
	e.target.health = Health{Drift: []Drift{{Object: sc, Patch: patch}, {Object: other, Patch: `{"data":{"color":"red"}}`}}}
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.Contains(t, err.Error(), `v1 ConfigMap app/settings was changed in the cluster (drift; the change: {"data":{"color":"red"}}) and no live rule reads it`)
	assert.NotContains(t, err.Error(), "StorageClass/longhorn", "the owned drift is not a reason")
	assert.Zero(t, e.target.applyCalls)
}

// An overlay the target's controller applies after U' (a HelmChartConfig)
// is in the values the chart is checked with, never in U', and every value
// it shadows is reported.
func TestMergeWithAnOverlay(t *testing.T) {
	var checked map[string]any
	newChart := &Chart{Name: "app", Version: "2.0.0",
		Defaults: map[string]any{"image": map[string]any{"tag": "v2"}, "replicas": int64(1)},
		Check: func(v map[string]any) error {
			checked = v
			if v["replicas"] == int64(0) {
				return outcome.Refused(errors.New("replicas must be positive"))
			}
			return nil
		}}
	in := MergeInputs{User: map[string]any{"replicas": int64(3), "name": "x"}, New: newChart,
		Overlay: map[string]any{"replicas": int64(5)}, OverlayFrom: "HelmChartConfig ns/app"}
	res, err := Merge(in)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"replicas": int64(3), "name": "x"}, res.Values, "the overlay never enters U'")
	assert.Equal(t, int64(5), checked["replicas"], "checked with the overlay laid over U'")
	var shadowed []string
	for _, w := range res.Warnings {
		if w.Kind == values.WarnOverriddenByConfig {
			shadowed = append(shadowed, w.Path)
			assert.Contains(t, w.Message, "HelmChartConfig ns/app")
		}
	}
	assert.Equal(t, []string{"replicas"}, shadowed)

	in.Overlay = map[string]any{"replicas": int64(0)}
	_, err = Merge(in)
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.Contains(t, err.Error(), "HelmChartConfig ns/app over them")
}
