package values_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func TestMigrationApplies(t *testing.T) {
	m := func(from, to string) values.Migration { return migration(t, "m", from, to, ".a = 1") }
	for _, c := range []struct {
		from, to   string // constraints
		fromV, toV string // versions
		want       bool
	}{
		{"", "", "1.0.0", "2.0.0", true},
		{"", "", "", "", true}, // no constraint: always
		{"<1.1.0", "", "1.0.9", "1.4.3", true},
		{"<1.1.0", "", "1.1.0", "1.4.3", false},
		{"<1.1.0", "", "v1.0.0", "v1.4.3", true}, // a leading v is semver too
		{"", ">=1.4.0", "1.3.2", "1.4.3", true},
		{"", ">=1.4.0", "1.3.2", "1.3.9", false},
		{">=1.3.0 <1.4.0", ">=1.4.0", "1.3.2", "1.4.3", true},
		{"<1.1.0", "", "not-semver", "1.4.3", false}, // a non-semver version satisfies no constraint
		{"", "", "not-semver", "also-not", true},
	} {
		got := m(c.from, c.to).Applies(semverOrNil(t, c.fromV), semverOrNil(t, c.toV))
		assert.Equal(t, c.want, got, "from %q to %q, versions %q → %q", c.from, c.to, c.fromV, c.toV)
	}

	_, err := values.NewMigration("bad", "<<1", "", mustExpr(t, ".a"))
	assert.ErrorContains(t, err, "from")
	_, err = values.NewMigration("bad", "", "~>x.y", mustExpr(t, ".a"))
	assert.ErrorContains(t, err, "to")
	_, err = values.NewMigration("bad", "", "", nil)
	assert.ErrorContains(t, err, "expr")
}

func TestMergeMigrations(t *testing.T) {
	base := func() values.Input {
		return values.Input{
			User:        vals(t, `{kube-vip: {config: {address: 1.2.3.4}, enabled: true}, v: zero}`),
			OldDefaults: vals(t, `{kube-vip: {enabled: false}}`),
			NewDefaults: vals(t, `{kube-vip: {enabled: false}}`),
			FromVersion: "1.0.5",
			ToVersion:   "1.1.0",
		}
	}

	t.Run("applied in file order", func(t *testing.T) {
		in := base()
		in.Migrations = []values.Migration{
			migration(t, "first", "<1.1.0", "", `.v = "one"`),
			migration(t, "second", ">=1.0.0", "", `.v = .v + "-two"`),
			migration(t, "drop-kube-vip-config", "<1.1.0", "", `del(.kube-vip.config)`),
		}
		res := mustMerge(t, in)
		assert.Equal(t, vals(t, `{kube-vip: {enabled: true}, v: one-two}`), res.Values)
		d := decisionAt(t, res, "v")
		assert.Equal(t, set("zero"), d.User, "the decision shows the user value before migrations")
		assert.Equal(t, set("one-two"), d.Result)
		assert.Contains(t, d.Reason, "first")
		assert.Contains(t, d.Reason, "second")
		d = decisionAt(t, res, "kube-vip.config.address")
		assert.Equal(t, set("1.2.3.4"), d.User)
		assert.Equal(t, unset, d.Result)
		assert.Contains(t, d.Reason, "drop-kube-vip-config")
	})

	t.Run("skipped when from does not match", func(t *testing.T) {
		in := base()
		in.FromVersion = "1.2.0"
		in.Migrations = []values.Migration{migration(t, "drop-kube-vip-config", "<1.1.0", "", `del(.kube-vip.config)`)}
		res := mustMerge(t, in)
		assert.Equal(t, vals(t, `{kube-vip: {config: {address: 1.2.3.4}, enabled: true}, v: zero}`), res.Values)
		assert.NotContains(t, decisionAt(t, res, "kube-vip.config.address").Reason, "migration")
	})

	t.Run("skipped when to does not match", func(t *testing.T) {
		in := base()
		in.Migrations = []values.Migration{
			migration(t, "for-2", "", ">=2.0.0", `.v = "two"`),
			migration(t, "for-1.1", "", "1.1.x", `.w = "yes"`),
		}
		res := mustMerge(t, in)
		assert.Equal(t, "zero", res.Values["v"])
		assert.Equal(t, "yes", res.Values["w"])
	})

	t.Run("a constrained migration is skipped without versions", func(t *testing.T) {
		in := base()
		in.FromVersion, in.ToVersion = "", ""
		in.Migrations = []values.Migration{
			migration(t, "constrained", "<9.0.0", "", `.v = "constrained"`),
			migration(t, "always", "", "", `.w = "always"`),
		}
		res := mustMerge(t, in)
		assert.Equal(t, "zero", res.Values["v"])
		assert.Equal(t, "always", res.Values["w"])
	})

	t.Run("a rename yields a decision on both paths", func(t *testing.T) {
		in := base()
		in.Migrations = []values.Migration{migration(t, "rename", "", "",
			`.kubeVip = .kube-vip | del(.kube-vip)`)}
		in.NewDefaults = vals(t, `{kubeVip: {enabled: false}}`)
		res := mustMerge(t, in)
		assert.Equal(t, vals(t, `{kubeVip: {config: {address: 1.2.3.4}, enabled: true}, v: zero}`), res.Values)
		d := decisionAt(t, res, "kube-vip.enabled")
		assert.Equal(t, set(true), d.User)
		assert.Equal(t, unset, d.Result)
		assert.Contains(t, d.Reason, "rename")
		d = decisionAt(t, res, "kubeVip.enabled")
		assert.Equal(t, unset, d.User)
		assert.Equal(t, set(true), d.Result)
		assert.Contains(t, d.Reason, "rename")
	})

	t.Run("migrations run before rules", func(t *testing.T) {
		in := base()
		in.OldDefaults = vals(t, `{image: {tag: v1}}`)
		in.NewDefaults = vals(t, `{image: {tag: v2}}`)
		in.User = vals(t, `{image: {tag: v1-custom}}`)
		in.Rules = rules(t, "follow:image.tag")
		in.Migrations = []values.Migration{migration(t, "normalise", "", "", `.image.tag = "v1"`)}
		res := mustMerge(t, in)
		assert.Equal(t, map[string]any{}, res.Values, "follow sees the migrated value, equal to Dold")
	})

	t.Run("a failing migration is bad input", func(t *testing.T) {
		in := base()
		in.Migrations = []values.Migration{migration(t, "boom", "", "", `.v = error("no")`)}
		_, err := values.Merge(in)
		require.Error(t, err)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Contains(t, err.Error(), "boom")
	})

	t.Run("a migration that does not give a map is bad input", func(t *testing.T) {
		in := base()
		in.Migrations = []values.Migration{migration(t, "scalar", "", "", `.v`)}
		_, err := values.Merge(in)
		require.Error(t, err)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Contains(t, err.Error(), "scalar")
	})
}

func TestMergeOverrides(t *testing.T) {
	in := values.Input{
		User:        vals(t, `{image: {tag: v1, repository: mine}, replicas: 3, list: [a]}`),
		OldDefaults: vals(t, `{image: {tag: v1}, replicas: 1}`),
		NewDefaults: vals(t, `{image: {tag: v2}, replicas: 1}`),
		Rules:       rules(t, "chart:image.tag"),
		Overrides: []values.Override{
			{Origin: "-f extra.yaml", Values: vals(t, `{image: {tag: v9, pullPolicy: Always}, replicas: 5, list: [b, c]}`)},
			{Origin: "--set replicas=7", Values: vals(t, `{replicas: 7}`)},
		},
	}
	res := mustMerge(t, in)
	assert.Equal(t, vals(t, `{image: {tag: v9, repository: mine, pullPolicy: Always}, replicas: 7, list: [b, c]}`), res.Values,
		"overrides are applied after the rules, in order, lists replaced whole")
	d := decisionAt(t, res, "image.tag")
	assert.Equal(t, values.ActionOverride, d.Action)
	assert.Equal(t, values.PolicyChart, d.Policy, "the decision still names the rule")
	assert.Contains(t, d.Reason, "-f extra.yaml")
	d = decisionAt(t, res, "replicas")
	assert.Equal(t, values.ActionOverride, d.Action)
	assert.Contains(t, d.Reason, "--set replicas=7", "the last override that sets a path is named")

	t.Run("override replaces a user scalar by a map and back", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{a: 1, b: {c: 2}}`),
			NewDefaults: vals(t, `{}`),
			Overrides:   []values.Override{{Origin: "-f x.yaml", Values: vals(t, `{a: {x: 1}, b: 3}`)}},
		})
		assert.Equal(t, vals(t, `{a: {x: 1}, b: 3}`), res.Values)
	})

	t.Run("override null deletes the default", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{}`),
			NewDefaults: vals(t, `{a: 1}`),
			Overrides:   []values.Override{{Origin: "--set a=null", Values: vals(t, `{a: null}`)}},
		})
		assert.Equal(t, map[string]any{"a": nil}, res.Values)
	})
}

func mustExpr(t testing.TB, s string) *values.Expr {
	t.Helper()
	e, err := values.ParseExpr(s)
	require.NoError(t, err)
	return e
}
