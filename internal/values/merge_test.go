package values_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// policyCase is one merge of a policy table: inline YAML inputs, the rules
// as "policy:pattern", and what docs/design.md §5 says comes out.
type policyCase struct {
	name  string
	user  string
	old   string // Dold; ignored when noOld
	noOld bool   // no deployed chart: Input.OldDefaults is nil
	new   string
	rules []string

	want      string                   // U'
	actions   map[string]values.Action // path → action, for the paths listed
	rule      map[string]int           // path → deciding rule (1-based, 0 = default)
	warnings  []string                 // every warning, "kind path", in order
	undecided []string                 // paths that must get no decision
}

func runPolicyCases(t *testing.T, cases []policyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := values.Input{
				User:        vals(t, tc.user),
				NewDefaults: vals(t, tc.new),
				Rules:       rules(t, tc.rules...),
				FromVersion: "1.0.0",
				ToVersion:   "1.1.0",
			}
			if !tc.noOld {
				in.OldDefaults = vals(t, tc.old)
			}
			res := mustMerge(t, in)
			assert.Equal(t, vals(t, tc.want), res.Values, "U'")
			for path, action := range tc.actions {
				assert.Equal(t, action, decisionAt(t, res, path).Action, "action at %s", path)
			}
			for path, r := range tc.rule {
				assert.Equal(t, r, decisionAt(t, res, path).Rule, "rule at %s", path)
			}
			want := tc.warnings
			if want == nil {
				want = []string{}
			}
			assert.Equal(t, want, warningList(res), "warnings")
			for _, path := range tc.undecided {
				assert.False(t, hasDecision(res, path), "%s must get no decision", path)
			}
		})
	}
}

func TestMergeUserPolicy(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name: "set value kept",
		user: `{a: 1}`, old: `{a: 0}`, new: `{a: 0}`,
		want:    `{a: 1}`,
		actions: map[string]values.Action{"a": values.ActionKeep},
		rule:    map[string]int{"a": 0},
	}, {
		name: "unset: nothing, the new default applies",
		user: `{}`, old: `{a: 0}`, new: `{a: 2}`,
		want:    `{}`,
		actions: map[string]values.Action{"a": values.ActionDefault},
	}, {
		name: "user value shadows a changed default",
		user: `{tag: v0.4.1}`, old: `{tag: v0.4.0}`, new: `{tag: v0.5.6}`,
		want:     `{tag: v0.4.1}`,
		actions:  map[string]values.Action{"tag": values.ActionKeep},
		warnings: []string{"shadowed-default tag"},
	}, {
		name: "user value equal to the old default is still kept (that is follow's job)",
		user: `{tag: v0.4.1}`, old: `{tag: v0.4.1}`, new: `{tag: v0.5.6}`,
		want:     `{tag: v0.4.1}`,
		warnings: []string{"shadowed-default tag"},
	}, {
		name: "user value equal to the new default: no shadow warning",
		user: `{tag: v0.5.6}`, old: `{tag: v0.4.1}`, new: `{tag: v0.5.6}`,
		want: `{tag: v0.5.6}`,
	}, {
		name: "explicit user rule gets its rule number",
		user: `{a: 1, b: 2}`, new: `{a: 0, b: 0}`, old: `{a: 0, b: 0}`,
		rules: []string{"user:b"},
		want:  `{a: 1, b: 2}`,
		rule:  map[string]int{"a": 0, "b": 1},
	}})
}

func TestMergeChartPolicy(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name:  "user override dropped",
		user:  `{image: {tag: v1, repository: mine}}`,
		old:   `{image: {tag: v1, repository: theirs}}`,
		new:   `{image: {tag: v2, repository: theirs}}`,
		rules: []string{"chart:image.tag"},
		want:  `{image: {repository: mine}}`,
		actions: map[string]values.Action{
			"image.tag":        values.ActionDrop,
			"image.repository": values.ActionKeep,
		},
		rule: map[string]int{"image.tag": 1, "image.repository": 0},
	}, {
		name:  "whole subtree dropped and pruned",
		user:  `{image: {tag: v1, repository: mine}}`,
		old:   `{image: {tag: v1, repository: theirs}}`,
		new:   `{image: {tag: v2, repository: theirs}}`,
		rules: []string{"chart:image"},
		want:  `{}`,
		actions: map[string]values.Action{
			"image.tag":        values.ActionDrop,
			"image.repository": values.ActionDrop,
		},
	}, {
		name: "no user value: nothing",
		user: `{}`, old: `{a: 1}`, new: `{a: 2}`,
		rules:   []string{"chart:a"},
		want:    `{}`,
		actions: map[string]values.Action{"a": values.ActionDefault},
	}})
}

func TestMergeFollowPolicy(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name: "value equal to the old default dropped so the new default applies",
		user: `{tag: v0.4.1}`, old: `{tag: v0.4.1}`, new: `{tag: v0.5.6}`,
		rules:   []string{"follow:tag"},
		want:    `{}`,
		actions: map[string]values.Action{"tag": values.ActionDrop},
	}, {
		name: "real customisation kept (and shadows the changed default)",
		user: `{tag: v0.4.1-hotfix}`, old: `{tag: v0.4.1}`, new: `{tag: v0.5.6}`,
		rules:    []string{"follow:tag"},
		want:     `{tag: v0.4.1-hotfix}`,
		actions:  map[string]values.Action{"tag": values.ActionKeep},
		warnings: []string{"shadowed-default tag"},
	}, {
		name: "customisation of a key the old chart did not have is kept",
		user: `{extra: 1}`, old: `{}`, new: `{}`,
		rules: []string{"follow:extra"},
		want:  `{extra: 1}`,
	}, {
		name: "numbers equal by value: int and float",
		user: `{num: 1}`, old: `{num: 1.0}`, new: `{num: 2}`,
		rules: []string{"follow:num"},
		want:  `{}`,
	}, {
		name: "unset: nothing",
		user: `{}`, old: `{tag: v1}`, new: `{tag: v2}`,
		rules:   []string{"follow:tag"},
		want:    `{}`,
		actions: map[string]values.Action{"tag": values.ActionDefault},
	}, {
		name:  "leaves of a matched map decided one by one",
		user:  `{image: {tag: v1, pullPolicy: Always}}`,
		old:   `{image: {tag: v1, pullPolicy: IfNotPresent}}`,
		new:   `{image: {tag: v2, pullPolicy: IfNotPresent}}`,
		rules: []string{"follow:image"},
		want:  `{image: {pullPolicy: Always}}`,
		actions: map[string]values.Action{
			"image.tag":        values.ActionDrop,
			"image.pullPolicy": values.ActionKeep,
		},
	}, {
		name: "list equal to the old default dropped whole",
		user: `{gates: [A, B]}`, old: `{gates: [A, B]}`, new: `{gates: [A, B, C]}`,
		rules: []string{"follow:gates"},
		want:  `{}`,
	}, {
		name: "without Dold: behaves as user and warns",
		user: `{tag: v0.4.1}`, noOld: true, new: `{tag: v0.5.6}`,
		rules:    []string{"follow:**.tag"},
		want:     `{tag: v0.4.1}`,
		actions:  map[string]values.Action{"tag": values.ActionKeep},
		warnings: []string{"no-old-chart **.tag"},
	}})
}

func TestMergeKeepPolicy(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name: "user value kept",
		user: `{s: {maxSurge: 5}}`, old: `{s: {maxSurge: 2}}`, new: `{s: {maxSurge: 1}}`,
		rules:    []string{"keep:s.**"},
		want:     `{s: {maxSurge: 5}}`,
		actions:  map[string]values.Action{"s.maxSurge": values.ActionKeep},
		warnings: nil, // keep chose to keep it: not a shadowed default
	}, {
		name:  "unset and default changed: old default pinned",
		user:  `{}`,
		old:   `{s: {maxSurge: 2, maxUnavailable: 2, type: RollingUpdate}}`,
		new:   `{s: {maxSurge: 1, maxUnavailable: 1, type: RollingUpdate}}`,
		rules: []string{"keep:s"},
		want:  `{s: {maxSurge: 2, maxUnavailable: 2}}`,
		actions: map[string]values.Action{
			"s.maxSurge":       values.ActionPin,
			"s.maxUnavailable": values.ActionPin,
		},
		warnings:  []string{"pinned s.maxSurge", "pinned s.maxUnavailable"},
		undecided: []string{"s.type"},
	}, {
		name: "unset and new key: nothing",
		user: `{}`, old: `{}`, new: `{fresh: 1}`,
		rules:   []string{"keep:fresh"},
		want:    `{}`,
		actions: map[string]values.Action{"fresh": values.ActionDefault},
	}, {
		name: "unset and key dropped by the new chart: old default pinned",
		user: `{}`, old: `{gone: x}`, new: `{}`,
		rules:    []string{"keep:gone"},
		want:     `{gone: x}`,
		actions:  map[string]values.Action{"gone": values.ActionPin},
		warnings: []string{"pinned gone"},
	}, {
		name: "unset and unchanged: nothing, no decision",
		user: `{}`, old: `{a: 1}`, new: `{a: 1}`,
		rules:     []string{"keep:a"},
		want:      `{}`,
		undecided: []string{"a"},
	}, {
		name: "without Dold: nothing to pin",
		user: `{}`, noOld: true, new: `{a: 1}`,
		rules:    []string{"keep:a"},
		want:     `{}`,
		warnings: []string{"no-old-chart a"},
	}})
}

func TestMergeBoundPolicies(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name: "max: larger number kept",
		user: `{num: 5}`, old: `{num: 3}`, new: `{num: 3}`,
		rules: []string{"max:num"}, want: `{num: 5}`,
		actions: map[string]values.Action{"num": values.ActionKeep},
	}, {
		name: "max: smaller number dropped",
		user: `{num: 2}`, old: `{num: 3}`, new: `{num: 3}`,
		rules: []string{"max:num"}, want: `{}`,
		actions: map[string]values.Action{"num": values.ActionDrop},
	}, {
		name: "max: equal kept",
		user: `{num: 3}`, old: `{num: 3}`, new: `{num: 3}`,
		rules: []string{"max:num"}, want: `{num: 3}`,
	}, {
		name: "min: smaller number kept",
		user: `{num: 2}`, old: `{num: 3}`, new: `{num: 3}`,
		rules: []string{"min:num"}, want: `{num: 2}`,
	}, {
		name: "min: larger number dropped",
		user: `{num: 5}`, old: `{num: 3}`, new: `{num: 3}`,
		rules: []string{"min:num"}, want: `{}`,
		actions: map[string]values.Action{"num": values.ActionDrop},
	}, {
		name: "max: int against float",
		user: `{a: 2, b: 1}`, old: `{a: 1.5, b: 1.5}`, new: `{a: 1.5, b: 1.5}`,
		rules: []string{"max:*"}, want: `{a: 2}`,
	}, {
		name: "min: float against int",
		user: `{a: 0.5, b: 2.5}`, old: `{a: 1, b: 2}`, new: `{a: 1, b: 2}`,
		rules: []string{"min:*"}, want: `{a: 0.5}`,
	}, {
		name: "max: cpu 500m < 1",
		user: `{cpu: 500m}`, old: `{cpu: 1}`, new: `{cpu: 1}`,
		rules: []string{"max:cpu"}, want: `{}`,
	}, {
		name: "min: cpu 500m < 1",
		user: `{cpu: 500m}`, old: `{cpu: 1}`, new: `{cpu: 1}`,
		rules: []string{"min:cpu"}, want: `{cpu: 500m}`,
	}, {
		name: "max: cpu 1 (number) > 500m",
		user: `{cpu: 1}`, old: `{cpu: 500m}`, new: `{cpu: 500m}`,
		rules: []string{"max:cpu"}, want: `{cpu: 1}`,
	}, {
		name: "max: cpu \"2\" (string) > 1500m",
		user: `{cpu: "2"}`, old: `{cpu: 1500m}`, new: `{cpu: 1500m}`,
		rules: []string{"max:cpu"}, want: `{cpu: "2"}`,
	}, {
		name: "max: memory 512Mi < 1Gi dropped",
		user: `{memory: 512Mi}`, old: `{memory: 1Gi}`, new: `{memory: 1Gi}`,
		rules: []string{"max:memory"}, want: `{}`,
	}, {
		name: "max: memory 1Gi > 512Mi kept",
		user: `{memory: 1Gi}`, old: `{memory: 512Mi}`, new: `{memory: 512Mi}`,
		rules: []string{"max:memory"}, want: `{memory: 1Gi}`,
	}, {
		name: "min: memory 1Gi > 512Mi dropped",
		user: `{memory: 1Gi}`, old: `{memory: 512Mi}`, new: `{memory: 512Mi}`,
		rules: []string{"min:memory"}, want: `{}`,
	}, {
		name: "max: memory 1024Mi equals 1Gi kept",
		user: `{memory: 1024Mi}`, old: `{memory: 1Gi}`, new: `{memory: 1Gi}`,
		rules: []string{"max:memory"}, want: `{memory: 1024Mi}`,
	}, {
		name: "max: memory 1G (decimal) < 1Gi",
		user: `{memory: 1G}`, old: `{memory: 1Gi}`, new: `{memory: 1Gi}`,
		rules: []string{"max:memory"}, want: `{}`,
	}, {
		name: "max: compares with the new default, not the old",
		user: `{memory: 768Mi}`, old: `{memory: 512Mi}`, new: `{memory: 1Gi}`,
		rules: []string{"max:memory"}, want: `{}`,
	}, {
		name:  "max: leaves under a matched map compared one by one",
		user:  `{c: {resources: {requests: {cpu: 100m, memory: 1Gi}, limits: {cpu: "2"}}}}`,
		old:   `{c: {resources: {requests: {cpu: 250m, memory: 256Mi}}}}`,
		new:   `{c: {resources: {requests: {cpu: 250m, memory: 256Mi}}}}`,
		rules: []string{"max:**.resources"},
		want:  `{c: {resources: {requests: {memory: 1Gi}, limits: {cpu: "2"}}}}`,
		actions: map[string]values.Action{
			"c.resources.requests.cpu":    values.ActionDrop,
			"c.resources.requests.memory": values.ActionKeep,
			"c.resources.limits.cpu":      values.ActionKeep, // no new default to compare with
		},
		rule:     map[string]int{"c.resources.requests.cpu": 1},
		warnings: []string{"orphan c.resources.limits"}, // the new resources map has no limits
	}, {
		name:  "max: non-comparable values keep the user value",
		user:  `{a: fast, b: true, c: [1], d: 1Gi}`,
		old:   `{a: 1Gi, b: 1, c: 2, d: slow}`,
		new:   `{a: 1Gi, b: 1, c: 2, d: slow}`,
		rules: []string{"max:*"},
		want:  `{a: fast, b: true, c: [1], d: 1Gi}`,
		actions: map[string]values.Action{
			"a": values.ActionKeep, "b": values.ActionKeep, "c": values.ActionKeep, "d": values.ActionKeep,
		},
	}, {
		name: "max: unset: nothing",
		user: `{}`, old: `{num: 1}`, new: `{num: 2}`,
		rules: []string{"max:num"}, want: `{}`,
		actions: map[string]values.Action{"num": values.ActionDefault},
	}})
}

func TestMergeBoundReasonNamesValues(t *testing.T) {
	res := mustMerge(t, values.Input{
		User: vals(t, `{cpu: 100m}`), OldDefaults: vals(t, `{cpu: 250m}`), NewDefaults: vals(t, `{cpu: 250m}`),
		Rules: rules(t, "max:cpu"),
	})
	d := decisionAt(t, res, "cpu")
	assert.Contains(t, d.Reason, "100m")
	assert.Contains(t, d.Reason, "250m")
}

func TestMergeRemovePolicy(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name: "user value removed and reported",
		user: `{kube-vip: {config: {address: 1.2.3.4}, enabled: true}}`,
		old:  `{kube-vip: {enabled: false}}`, new: `{kube-vip: {enabled: false}}`,
		rules:   []string{"remove:kube-vip.config"},
		want:    `{kube-vip: {enabled: true}}`,
		actions: map[string]values.Action{"kube-vip.config.address": values.ActionRemove},
		rule:    map[string]int{"kube-vip.config.address": 1},
	}, {
		name: "unset: nothing",
		user: `{}`, old: `{a: 1}`, new: `{a: 1}`,
		rules: []string{"remove:a"}, want: `{}`,
		undecided: []string{"a"},
	}})
	res := mustMerge(t, values.Input{
		User: vals(t, `{a: 1}`), OldDefaults: vals(t, `{a: 0}`), NewDefaults: vals(t, `{a: 0}`),
		Rules: rules(t, "remove:a"),
	})
	d := decisionAt(t, res, "a")
	assert.Equal(t, set(int64(1)), d.User, "the removed value is reported")
	assert.Equal(t, unset, d.Result)
}

func TestMergePatterns(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name:  "* matches exactly one key",
		user:  `{image: {tag: a}, x: {image: {tag: b}}, x2: {mid: {image: {tag: c}}}}`,
		rules: []string{"chart:*.image.tag"},
		want:  `{image: {tag: a}, x2: {mid: {image: {tag: c}}}}`,
		actions: map[string]values.Action{
			"image.tag":        values.ActionKeep,
			"x.image.tag":      values.ActionDrop,
			"x2.mid.image.tag": values.ActionKeep,
		},
	}, {
		name:  "** matches zero or more keys",
		user:  `{tag: a, x: {tag: b}, x2: {mid: {z: {tag: c}}}, other: d}`,
		rules: []string{"chart:**.tag"},
		want:  `{other: d}`,
	}, {
		name:  "a.** matches a itself and everything below",
		user:  `{a: {b: 1, c: {d: 2}}, ab: 3}`,
		rules: []string{"chart:a.**"},
		want:  `{ab: 3}`,
	}, {
		name:  "** in the middle",
		user:  `{a: {x: {mid: {b: 1}}, b: 2, c: 3}}`,
		rules: []string{"chart:a.**.b"},
		want:  `{a: {c: 3}}`,
	}, {
		name:  "bracketed key with dots",
		user:  `{nodeSelector: {"node-role.kubernetes.io/control-plane": "true", "kubernetes.io/os": linux}}`,
		new:   `{nodeSelector: {"node-role.kubernetes.io/control-plane": "true"}}`,
		old:   `{nodeSelector: {"node-role.kubernetes.io/control-plane": "true"}}`,
		rules: []string{`chart:nodeSelector["node-role.kubernetes.io/control-plane"]`},
		want:  `{nodeSelector: {"kubernetes.io/os": linux}}`,
		actions: map[string]values.Action{
			`nodeSelector["node-role.kubernetes.io/control-plane"]`: values.ActionDrop,
			`nodeSelector["kubernetes.io/os"]`:                      values.ActionKeep,
		},
		warnings: []string{`orphan nodeSelector["kubernetes.io/os"]`},
	}, {
		name:  "a dotted pattern does not match a dotted key",
		user:  `{"a.b": 1, a: {b: 2}}`,
		rules: []string{"chart:a.b"},
		want:  `{"a.b": 1}`,
	}, {
		name:  "first matching rule wins: rule on a.b.c beats a later rule on a",
		user:  `{a: {b: {c: 1, d: 2}}}`,
		rules: []string{"user:a.b.c", "chart:a"},
		want:  `{a: {b: {c: 1}}}`,
		rule:  map[string]int{"a.b.c": 1, "a.b.d": 2},
	}, {
		name:  "first matching rule wins: an earlier rule on an ancestor beats a later exact rule",
		user:  `{a: {b: {c: 1, d: 2}}}`,
		rules: []string{"chart:a", "user:a.b.c"},
		want:  `{}`,
		rule:  map[string]int{"a.b.c": 1, "a.b.d": 1},
	}, {
		name:  "first of two wildcard rules wins",
		user:  `{x: {image: {tag: v1}}, w: {image: {tag: v1}}}`,
		old:   `{x: {image: {tag: v1}}, w: {image: {tag: v1}}}`,
		new:   `{x: {image: {tag: v2}}, w: {image: {tag: v2}}}`,
		rules: []string{"keep:w.**", "follow:**.image.tag"},
		want:  `{w: {image: {tag: v1}}}`,
		rule:  map[string]int{"x.image.tag": 2, "w.image.tag": 1},
		// keep is an explicit decision to keep: no shadowed-default warning
		warnings: nil,
	}, {
		name:  "** alone decides everything",
		user:  `{a: 1, b: {c: 2}}`,
		rules: []string{"chart:**", "user:a"},
		want:  `{}`,
		rule:  map[string]int{"a": 1, "b.c": 1},
	}})
}

// TestMergeNoRulesIsUserPolicy: without rules every path is decided by the
// default policy user, rule 0.
func TestMergeNoRulesIsUserPolicy(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, `{a: {b: 1}, c: [1, 2]}`),
		OldDefaults: vals(t, `{a: {b: 0}, c: []}`),
		NewDefaults: vals(t, `{a: {b: 0}, c: []}`),
	})
	assert.Equal(t, vals(t, `{a: {b: 1}, c: [1, 2]}`), res.Values)
	for _, d := range res.Decisions {
		assert.Equal(t, values.PolicyUser, d.Policy, d.Path)
		assert.Equal(t, 0, d.Rule, d.Path)
	}
}

func TestMergeMinimalAndPruned(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, `{a: {b: {c: {tag: v1}}}, d: {e: v1, f: keep-me}}`),
		OldDefaults: vals(t, `{a: {b: {c: {tag: v1}}}, d: {e: v1, f: x}}`),
		NewDefaults: vals(t, `{a: {b: {c: {tag: v2}}}, d: {e: v2, f: x}}`),
		Rules:       rules(t, "follow:**"),
	})
	assert.Equal(t, vals(t, `{d: {f: keep-me}}`), res.Values)
	assert.Equal(t, "d:\n  f: keep-me\n", string(res.YAML))

	res = mustMerge(t, values.Input{
		User:        vals(t, `{a: {b: {c: {tag: v1}}}}`),
		OldDefaults: vals(t, `{a: {b: {c: {tag: v1}}}}`),
		NewDefaults: vals(t, `{a: {b: {c: {tag: v2}}}}`),
		Rules:       rules(t, "follow:**"),
	})
	assert.Equal(t, map[string]any{}, res.Values)
	assert.Equal(t, "{}\n", string(res.YAML), "every emptied map is pruned, the root included")
}

// TestMergeEmptyInputs: nil user values and nil new defaults are empty.
func TestMergeEmptyInputs(t *testing.T) {
	res := mustMerge(t, values.Input{})
	assert.Equal(t, map[string]any{}, res.Values)
	assert.Equal(t, "{}\n", string(res.YAML))
	assert.Empty(t, res.Decisions)
	assert.NotNil(t, res.Decisions, "decisions encode as [], not null")
	assert.NotNil(t, res.Warnings, "warnings encode as [], not null")

	res = mustMerge(t, values.Input{User: vals(t, `{a: 1}`)})
	assert.Equal(t, vals(t, `{a: 1}`), res.Values)
}

// TestMergeDoesNotModifyInput: the merge works on copies.
func TestMergeDoesNotModifyInput(t *testing.T) {
	user := vals(t, `{a: {b: 1, c: [1, 2]}, d: x}`)
	old := vals(t, `{a: {b: 0}, s: {m: 2}}`)
	nw := vals(t, `{a: {b: 0}, s: {m: 1}}`)
	over := vals(t, `{a: {b: 9}}`)
	in := values.Input{
		User: user, OldDefaults: old, NewDefaults: nw,
		Rules:      rules(t, "keep:s.**"),
		Migrations: []values.Migration{migration(t, "set-d", "", "", `.d = "changed"`)},
		Overrides:  []values.Override{{Origin: "--set a.b=9", Values: over}},
	}
	res := mustMerge(t, in)
	assert.Equal(t, vals(t, `{a: {b: 9, c: [1, 2]}, d: changed, s: {m: 2}}`), res.Values)
	assert.Equal(t, vals(t, `{a: {b: 1, c: [1, 2]}, d: x}`), user)
	assert.Equal(t, vals(t, `{a: {b: 0}, s: {m: 2}}`), old)
	assert.Equal(t, vals(t, `{a: {b: 0}, s: {m: 1}}`), nw)
	assert.Equal(t, vals(t, `{a: {b: 9}}`), over)

	// mutating the result does not reach the inputs either
	res.Values["a"].(map[string]any)["c"].([]any)[0] = int64(42)
	assert.Equal(t, vals(t, `{a: {b: 1, c: [1, 2]}, d: x}`), user)
	assert.Equal(t, vals(t, `{a: {b: 9}}`), over)
}

func TestMergeRuleWithoutMatch(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, `{a: 1}`),
		OldDefaults: vals(t, `{a: 1}`),
		NewDefaults: vals(t, `{a: 1}`),
		Rules:       rules(t, "chart:nothing.here"),
	})
	require.Equal(t, vals(t, `{a: 1}`), res.Values)
	assert.Equal(t, 0, decisionAt(t, res, "a").Rule)
}
