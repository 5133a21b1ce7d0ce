package values_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// promote mirrors the installer's promote block, fixed at install time.
const promoteUser = `{promote: {clusterPodCIDR: 10.52.0.0/16, clusterServiceCIDR: 10.53.0.0/16, clusterDNS: 10.53.0.10}}`

func TestMergeReadonlyLikeKeep(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name: "user value kept",
		user: promoteUser, old: `{}`, new: `{}`,
		rules:   []string{"readonly:promote.**"},
		want:    promoteUser,
		actions: map[string]values.Action{"promote.clusterDNS": values.ActionKeep},
		rule:    map[string]int{"promote.clusterDNS": 1},
	}, {
		name: "unset and default changed: old default pinned",
		user: `{}`, old: `{cidr: 10.52.0.0/16}`, new: `{cidr: 10.42.0.0/16}`,
		rules:    []string{"readonly:cidr"},
		want:     `{cidr: 10.52.0.0/16}`,
		actions:  map[string]values.Action{"cidr": values.ActionPin},
		warnings: []string{"pinned cidr"},
	}, {
		name: "unset and new key: nothing",
		user: `{}`, old: `{}`, new: `{cidr: 10.42.0.0/16}`,
		rules: []string{"readonly:cidr"},
		want:  `{}`,
	}})
}

func TestMergeReadonlyRefusals(t *testing.T) {
	type tc struct {
		name       string
		user, old  string
		new        string
		migrations []values.Migration
		overrides  []values.Override
		rules      []string
		refused    bool
		mentions   []string // the error must name these
		want       string   // U' when not refused
	}
	cases := []tc{{
		name: "migration changes the user value: refused, naming the path",
		user: promoteUser,
		old:  `{}`, new: `{}`,
		rules:      []string{"readonly:promote.**"},
		migrations: []values.Migration{migration(t, "move-dns", "", "", `.promote.clusterDNS = "10.43.0.10"`)},
		refused:    true,
		mentions:   []string{"promote.clusterDNS", "move-dns", "10.53.0.10", "10.43.0.10"},
	}, {
		name: "migration deletes the user value: refused",
		user: promoteUser,
		old:  `{}`, new: `{}`,
		rules:      []string{"readonly:promote.**"},
		migrations: []values.Migration{migration(t, "drop-cidr", "", "", `del(.promote.clusterPodCIDR)`)},
		refused:    true,
		mentions:   []string{"promote.clusterPodCIDR", "drop-cidr"},
	}, {
		name: "migration that leaves the readonly value alone: fine",
		user: promoteUser,
		old:  `{}`, new: `{}`,
		rules:      []string{"readonly:promote.**"},
		migrations: []values.Migration{migration(t, "other", "", "", `.other = 1`)},
		want:       `{other: 1, promote: {clusterPodCIDR: 10.52.0.0/16, clusterServiceCIDR: 10.53.0.0/16, clusterDNS: 10.53.0.10}}`,
	}, {
		name: "migration writes the value the chart already renders: fine",
		user: `{}`,
		old:  `{dns: 10.53.0.10}`, new: `{dns: 10.53.0.10}`,
		rules:      []string{"readonly:dns"},
		migrations: []values.Migration{migration(t, "explicit-dns", "", "", `.dns = "10.53.0.10"`)},
		want:       `{dns: 10.53.0.10}`,
	}, {
		name: "migration writes the new default over a pinned old default: refused",
		user: `{}`,
		old:  `{dns: 10.53.0.10}`, new: `{dns: 10.43.0.10}`,
		rules:      []string{"readonly:dns"},
		migrations: []values.Migration{migration(t, "to-new", "", "", `.dns = "10.43.0.10"`)},
		refused:    true,
		mentions:   []string{"dns", "to-new"},
	}, {
		name: "--set changes the value: refused, naming the path and the override",
		user: promoteUser,
		old:  `{}`, new: `{}`,
		rules:     []string{"readonly:promote.**"},
		overrides: []values.Override{{Origin: "--set promote.clusterPodCIDR=10.99.0.0/16", Values: vals(t, `{promote: {clusterPodCIDR: 10.99.0.0/16}}`)}},
		refused:   true,
		mentions:  []string{"promote.clusterPodCIDR", "--set promote.clusterPodCIDR=10.99.0.0/16"},
	}, {
		name: "--set of the same value: fine",
		user: promoteUser,
		old:  `{}`, new: `{}`,
		rules:     []string{"readonly:promote.**"},
		overrides: []values.Override{{Origin: "--set promote.clusterDNS=10.53.0.10", Values: vals(t, `{promote: {clusterDNS: 10.53.0.10}}`)}},
		want:      promoteUser,
	}, {
		name: "-f with the value the chart renders anyway: fine",
		user: `{}`,
		old:  `{dns: 10.53.0.10}`, new: `{dns: 10.53.0.10}`,
		rules:     []string{"readonly:dns"},
		overrides: []values.Override{{Origin: "-f extra.yaml", Values: vals(t, `{dns: 10.53.0.10}`)}},
		want:      `{dns: 10.53.0.10}`,
	}, {
		name: "-f of the pinned old default: fine",
		user: `{}`,
		old:  `{dns: 10.53.0.10}`, new: `{dns: 10.43.0.10}`,
		rules:     []string{"readonly:dns"},
		overrides: []values.Override{{Origin: "-f extra.yaml", Values: vals(t, `{dns: 10.53.0.10}`)}},
		want:      `{dns: 10.53.0.10}`,
	}, {
		name: "--set null deletes a readonly user value: refused",
		user: promoteUser,
		old:  `{}`, new: `{}`,
		rules:     []string{"readonly:promote.**"},
		overrides: []values.Override{{Origin: "--set promote.clusterDNS=null", Values: vals(t, `{promote: {clusterDNS: null}}`)}},
		refused:   true,
		mentions:  []string{"promote.clusterDNS"},
	}, {
		name:      "--set promote=null under a rule on promote.**: refused",
		user:      promoteUser,
		old:       `{}`,
		new:       `{}`,
		rules:     []string{"readonly:promote.**"},
		overrides: []values.Override{{Origin: "--set promote=null", Values: vals(t, `{promote: null}`)}},
		refused:   true,
		mentions:  []string{"promote", "--set promote=null"},
	}, {
		name: "an override elsewhere does not disturb readonly values",
		user: promoteUser,
		old:  `{}`, new: `{}`,
		rules:     []string{"readonly:promote.**"},
		overrides: []values.Override{{Origin: "--set replicas=1", Values: vals(t, `{replicas: 1}`)}},
		want:      `{replicas: 1, promote: {clusterPodCIDR: 10.52.0.0/16, clusterServiceCIDR: 10.53.0.0/16, clusterDNS: 10.53.0.10}}`,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := values.Merge(values.Input{
				User: vals(t, c.user), OldDefaults: vals(t, c.old), NewDefaults: vals(t, c.new),
				Rules: rules(t, c.rules...), Migrations: c.migrations, Overrides: c.overrides,
				FromVersion: "1.3.2", ToVersion: "1.4.3",
			})
			if !c.refused {
				require.NoError(t, err)
				assert.Equal(t, vals(t, c.want), res.Values)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, outcome.ErrRefused), "a readonly violation is a refusal: %v", err)
			assert.Equal(t, outcome.ExitRefused, outcome.Code(err))
			for _, s := range c.mentions {
				assert.Contains(t, err.Error(), s)
			}
			require.NotNil(t, res, "the result comes with the refusal, for the report")
			refusedSomewhere := false
			for _, d := range res.Decisions {
				if d.Policy == values.PolicyReadonly && len(d.Reason) >= 7 && d.Reason[:7] == "REFUSED" {
					refusedSomewhere = true
				}
			}
			assert.True(t, refusedSomewhere, "the report marks the refused decision")
		})
	}
}

// TestMergeReadonlyAncestorReplaced: an override (or migration) that
// replaces a map above a readonly path with a scalar or null changes the
// effective value of that path too; docs/design.md §5.4 says the merge is refused.
func TestMergeReadonlyAncestorReplaced(t *testing.T) {
	for _, c := range []struct {
		name string
		in   values.Input
	}{{
		name: "--set promote=null",
		in: values.Input{
			User: vals(t, promoteUser), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			Rules:     rules(t, "readonly:promote.clusterDNS"),
			Overrides: []values.Override{{Origin: "--set promote=null", Values: vals(t, `{promote: null}`)}},
		},
	}, {
		name: "migration turns promote into a string",
		in: values.Input{
			User: vals(t, promoteUser), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			Rules:      rules(t, "readonly:promote.clusterDNS"),
			Migrations: []values.Migration{migration(t, "flatten", "", "", `.promote = "none"`)},
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			_, err := values.Merge(c.in)
			require.Error(t, err, "promote.clusterDNS is readonly and its effective value changes")
			assert.ErrorIs(t, err, outcome.ErrRefused)
			assert.Contains(t, err.Error(), "promote")
		})
	}
}
