package values_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func TestMergeEdges(t *testing.T) {
	runPolicyCases(t, []policyCase{{
		name: "null user value kept as null (it deletes the default in Helm)",
		user: `{a: null, m: {x: null}}`, old: `{a: 1, m: {x: 1, z: 2}}`, new: `{a: 1, m: {x: 1, z: 2}}`,
		want:    `{a: null, m: {x: null}}`,
		actions: map[string]values.Action{"a": values.ActionKeep, "m.x": values.ActionKeep},
	}, {
		name: "null differs from the old default under follow",
		user: `{a: null}`, old: `{a: 1}`, new: `{a: 2}`,
		rules:    []string{"follow:a"},
		want:     `{a: null}`,
		warnings: []string{"shadowed-default a"},
	}, {
		name: "null over a map default",
		user: `{m: null}`, old: `{m: {x: 1}}`, new: `{m: {x: 1}}`,
		want:    `{m: null}`,
		actions: map[string]values.Action{"m": values.ActionKeep},
	}, {
		name: "null dropped by chart",
		user: `{a: null}`, old: `{a: 1}`, new: `{a: 1}`,
		rules: []string{"chart:a"},
		want:  `{}`,
	}, {
		name: "lists are leaves, replaced whole",
		user: `{l: [a, b]}`, old: `{l: [a]}`, new: `{l: [a, b, c]}`,
		want:     `{l: [a, b]}`,
		actions:  map[string]values.Action{"l": values.ActionKeep},
		warnings: []string{"shadowed-default l"},
	}, {
		name: "patterns do not reach into lists",
		user: `{l: [{name: x, image: {tag: v1}}]}`, old: `{}`, new: `{}`,
		rules:     []string{"chart:**.tag", "chart:**.name"},
		want:      `{l: [{name: x, image: {tag: v1}}]}`,
		undecided: []string{"l.name", "l.image.tag"},
	}, {
		name: "map in the old chart, scalar in the new",
		user: `{a: {b: 2}}`, old: `{a: {b: 1}}`, new: `{a: flat}`,
		want:     `{a: {b: 2}}`,
		actions:  map[string]values.Action{"a": values.ActionKeep},
		warnings: []string{"shadowed-default a"},
	}, {
		name: "scalar in the old chart, map in the new; follow drops the old scalar",
		user: `{a: 1}`, old: `{a: 1}`, new: `{a: {b: 1}}`,
		rules:   []string{"follow:a"},
		want:    `{}`,
		actions: map[string]values.Action{"a": values.ActionDrop},
	}, {
		name: "scalar to map, unset: keep pins the old scalar",
		user: `{}`, old: `{a: 1}`, new: `{a: {b: 1}}`,
		rules:    []string{"keep:a"},
		want:     `{a: 1}`,
		warnings: []string{"pinned a"},
	}, {
		name: "keys with dots are one key",
		user: `{nodeSelector: {"kubernetes.io/os": linux}, "a.b": {c: 1}}`,
		old:  `{nodeSelector: {}}`, new: `{nodeSelector: {}}`,
		want: `{nodeSelector: {"kubernetes.io/os": linux}, "a.b": {c: 1}}`,
		actions: map[string]values.Action{
			`nodeSelector["kubernetes.io/os"]`: values.ActionKeep,
			`["a.b"].c`:                        values.ActionKeep,
		},
		warnings: []string{`orphan ["a.b"]`},
	}, {
		name: "an empty user map over a non-empty default is pruned",
		user: `{sel: {}}`, old: `{sel: {a: 1}}`, new: `{sel: {a: 1}}`,
		want: `{}`,
	}, {
		name:  "user value of another type than the default",
		user:  `{replicas: "3", enabled: "true", tolerations: {key: x}}`,
		old:   `{replicas: 3, enabled: true, tolerations: []}`,
		new:   `{replicas: 3, enabled: true, tolerations: []}`,
		rules: []string{"follow:**"},
		want:  `{replicas: "3", enabled: "true", tolerations: {key: x}}`,
	}, {
		name:  "deep subchart-like nesting",
		user:  `{sub1: {sub2: {sub3: {sub4: {sub5: {image: {tag: v1, repository: mine}, resources: {limits: {memory: 64Mi}}}}}}}}`,
		old:   `{sub1: {sub2: {sub3: {sub4: {sub5: {image: {tag: v1, repository: theirs}, resources: {limits: {memory: 128Mi}}}}}}}}`,
		new:   `{sub1: {sub2: {sub3: {sub4: {sub5: {image: {tag: v2, repository: theirs}, resources: {limits: {memory: 128Mi}}}}}}}}`,
		rules: []string{"follow:**.image.tag", "max:**.resources"},
		want:  `{sub1: {sub2: {sub3: {sub4: {sub5: {image: {repository: mine}}}}}}}`,
		actions: map[string]values.Action{
			"sub1.sub2.sub3.sub4.sub5.image.tag":               values.ActionDrop,
			"sub1.sub2.sub3.sub4.sub5.image.repository":        values.ActionKeep,
			"sub1.sub2.sub3.sub4.sub5.resources.limits.memory": values.ActionDrop,
		},
		rule: map[string]int{
			"sub1.sub2.sub3.sub4.sub5.image.tag":               1,
			"sub1.sub2.sub3.sub4.sub5.resources.limits.memory": 2,
		},
	}})
}

func TestMergeNullYAML(t *testing.T) {
	res := mustMerge(t, values.Input{User: vals(t, `{a: null}`), NewDefaults: vals(t, `{a: 1}`)})
	assert.Equal(t, "a: null\n", string(res.YAML))
	js := string(resultJSON(t, res))
	assert.Contains(t, js, `"user": null`, "null is the YAML value null")
	assert.Contains(t, js, `"result": null`)
	assert.NotContains(t, js, `"old"`, "no old chart: old is absent, not null")
}

func TestMergeDecisions(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, `{a: 1, m: {x: 1}}`),
		OldDefaults: vals(t, `{a: 1, b: 2, c: 3, gone: 1, m: {x: 0, z: 0}, same: {deep: {er: 1}}}`),
		NewDefaults: vals(t, `{a: 1, b: 2, c: 4, d: 5, m: {x: 0, z: 0}, same: {deep: {er: 1}}}`),
	})
	assert.Equal(t, []string{"a", "c", "d", "gone", "m.x"}, decisionPaths(res),
		"user values and changed defaults, in path order; unchanged defaults without a user value get none")

	c := decisionAt(t, res, "c")
	assert.Equal(t, set(int64(3)), c.Old)
	assert.Equal(t, set(int64(4)), c.New)
	assert.Equal(t, unset, c.User)
	assert.Equal(t, unset, c.Result)
	assert.Equal(t, values.ActionDefault, c.Action)
	assert.NotEmpty(t, c.Reason)
	d := decisionAt(t, res, "d")
	assert.Equal(t, unset, d.Old, "a key new in the new chart has no old value")
	gone := decisionAt(t, res, "gone")
	assert.Equal(t, unset, gone.New)

	t.Run("without Dold only user paths and rule outcomes", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{a: 1}`),
			NewDefaults: vals(t, `{a: 0, b: 2}`),
		})
		assert.Equal(t, []string{"a"}, decisionPaths(res))
		assert.Equal(t, unset, decisionAt(t, res, "a").Old)
	})

	t.Run("rules and migrations that touch a path", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{}`),
			OldDefaults: vals(t, `{p: 1, q: 1}`),
			NewDefaults: vals(t, `{p: 1, q: 1}`),
			Migrations:  []values.Migration{migration(t, "add-q", "", "", `.q = 2`)},
			Rules:       rules(t, "keep:p"),
		})
		assert.Equal(t, []string{"q"}, decisionPaths(res), "a rule that changes nothing leaves no trace; a migration does")
		assert.Contains(t, decisionAt(t, res, "q").Reason, "add-q")
	})
}

func TestMergeWarnings(t *testing.T) {
	t.Run("shadowed-default names both values", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{image: {tag: v0.4.1}}`),
			OldDefaults: vals(t, `{image: {tag: v0.4.0}}`),
			NewDefaults: vals(t, `{image: {tag: v0.5.6}}`),
		})
		w := warningsOf(res, values.WarnShadowedDefault)
		require.Len(t, w, 1)
		assert.Equal(t, "image.tag", w[0].Path)
		assert.Contains(t, w[0].Message, "v0.4.1")
		assert.Contains(t, w[0].Message, "v0.5.6")
	})

	t.Run("no shadow when the default did not change", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{image: {tag: mine}}`),
			OldDefaults: vals(t, `{image: {tag: v1}}`),
			NewDefaults: vals(t, `{image: {tag: v1}}`),
		})
		assert.Empty(t, res.Warnings)
	})

	t.Run("orphans under non-empty maps only", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{typo: 1, image: {tga: v1, tag: v2}, nodeSelector: {disk: ssd}, podAnnotations: {a: b}, sub: {x: {w: 1}}}`),
			NewDefaults: vals(t, `{image: {tag: v1}, nodeSelector: {}, sub: {x: {z: 1}}, replicas: 1}`),
		})
		assert.Equal(t, []string{"orphan image.tga", "orphan podAnnotations", "orphan sub.x.w", "orphan typo"}, warningList(res))
		for _, w := range res.Warnings {
			assert.NotEmpty(t, w.Message)
		}
	})

	t.Run("no orphan when the new defaults are empty", func(t *testing.T) {
		res := mustMerge(t, values.Input{User: vals(t, `{a: 1}`), NewDefaults: vals(t, `{}`)})
		assert.Empty(t, res.Warnings)
	})

	t.Run("regenerated-data is passed through, naming the file", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			RegeneratedData: []string{"templates/webhook.yaml", "templates/secret.yaml"},
		})
		assert.Equal(t, []string{"regenerated-data templates/secret.yaml", "regenerated-data templates/webhook.yaml"}, warningList(res))
	})

	t.Run("warnings are sorted by kind, then path", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:            vals(t, `{z: 1, a: {tag: v1}}`),
			OldDefaults:     vals(t, `{a: {tag: v0}, s: 1}`),
			NewDefaults:     vals(t, `{a: {tag: v2}, s: 2}`),
			Rules:           rules(t, "keep:s"),
			RegeneratedData: []string{"templates/x.yaml"},
		})
		assert.Equal(t, []string{"orphan z", "pinned s", "regenerated-data templates/x.yaml", "shadowed-default a.tag"}, warningList(res))
	})
}

// determinismInput exercises every policy, migrations, overrides and live
// values; its maps are rebuilt for each call, so map order varies.
func determinismInput(t testing.TB) values.Input {
	user := map[string]any{}
	old := map[string]any{}
	nw := map[string]any{}
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("k%03d", i)
		old[k] = map[string]any{"image": map[string]any{"tag": "v1"}, "n": int64(i)}
		nw[k] = map[string]any{"image": map[string]any{"tag": "v2"}, "n": int64(i % 7)}
		if i%3 == 0 {
			user[k] = map[string]any{"image": map[string]any{"tag": "v1"}, "n": int64(i + 1)}
		}
	}
	return values.Input{
		User: user, OldDefaults: old, NewDefaults: nw,
		Rules: append(rules(t, "follow:**.image.tag", "chart:k002", "remove:k003", "keep:k004.**", "max:*.n"),
			liveRule(t, "storageClass.defaultStorageClass", "live", scRef, scExpr)),
		Migrations:      []values.Migration{migration(t, "m", "", "", `.extra = {"b": 2, "a": 1}`)},
		Live:            parseLive(t, liveObjects),
		Overrides:       []values.Override{{Origin: "--set k150.n=1", Values: map[string]any{"k150": map[string]any{"n": 1}}}},
		FromVersion:     "1.0.0",
		ToVersion:       "2.0.0",
		RegeneratedData: []string{"templates/b.yaml", "templates/a.yaml"},
	}
}

func TestMergeDeterministic(t *testing.T) {
	first := mustMerge(t, determinismInput(t))
	for i := 0; i < 5; i++ {
		again := mustMerge(t, determinismInput(t))
		require.Equal(t, string(first.YAML), string(again.YAML))
		require.Equal(t, first.SHA256, again.SHA256)
		require.Equal(t, string(resultJSON(t, first)), string(resultJSON(t, again)))
		require.Equal(t, string(resultTable(t, first)), string(resultTable(t, again)))
	}

	sum := sha256.Sum256(first.YAML)
	assert.Equal(t, hex.EncodeToString(sum[:]), first.SHA256, "SHA256 is the hash of the YAML bytes")
	h, err := values.Hash(first.Values)
	require.NoError(t, err)
	assert.Equal(t, first.SHA256, h)
	y, err := values.Marshal(first.Values)
	require.NoError(t, err)
	assert.Equal(t, first.YAML, y)

	// keys are sorted in the YAML
	lines := strings.Split(string(first.YAML), "\n")
	var top []string
	for _, l := range lines {
		if l != "" && l[0] != ' ' {
			top = append(top, l)
		}
	}
	assert.IsIncreasing(t, top)

	// re-parsing the YAML gives the values back
	back, err := values.Parse(first.YAML)
	require.NoError(t, err)
	assert.Equal(t, first.Values, back)
}

func TestResultJSONShape(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:            vals(t, `{a: 1, b: null}`),
		OldDefaults:     vals(t, `{a: 0, c: 1}`),
		NewDefaults:     vals(t, `{a: 0, c: 2, b: 1}`),
		FromVersion:     "1.3.2",
		ToVersion:       "1.4.3",
		RegeneratedData: []string{"templates/webhook.yaml"},
	})
	var doc map[string]any
	require.NoError(t, json.Unmarshal(resultJSON(t, res), &doc))
	assert.ElementsMatch(t, []string{"from", "to", "values", "sha256", "decisions", "warnings"}, keysOf(doc))
	assert.Equal(t, "1.3.2", doc["from"])
	assert.Equal(t, "1.4.3", doc["to"])
	assert.Equal(t, res.SHA256, doc["sha256"])
	decs := doc["decisions"].([]any)
	require.Len(t, decs, 3)
	byPath := map[string]map[string]any{}
	for _, d := range decs {
		m := d.(map[string]any)
		byPath[m["path"].(string)] = m
	}
	assert.ElementsMatch(t, []string{"path", "policy", "rule", "old", "new", "user", "result", "action", "reason"}, keysOf(byPath["a"]))
	assert.ElementsMatch(t, []string{"path", "policy", "rule", "new", "user", "result", "action", "reason"}, keysOf(byPath["b"]),
		"old is absent: not set")
	assert.Nil(t, byPath["b"]["user"], "null is null")
	assert.ElementsMatch(t, []string{"path", "policy", "rule", "old", "new", "action", "reason"}, keysOf(byPath["c"]))
	ws := doc["warnings"].([]any)
	require.Len(t, ws, 2)
	assert.Equal(t, map[string]any{"kind": "regenerated-data", "path": "templates/webhook.yaml",
		"message": res.Warnings[0].Message}, ws[0])
	assert.Equal(t, "shadowed-default", ws[1].(map[string]any)["kind"], "null hides the new default of b")
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSummaryAndTable(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, `{a: 1, b: 2}`),
		OldDefaults: vals(t, `{a: 0, b: 2}`),
		NewDefaults: vals(t, `{a: 0, b: 3}`),
		Rules:       rules(t, "follow:b"),
		FromVersion: "1.0.0", ToVersion: "1.1.0",
	})
	s := res.Summary()
	assert.Contains(t, s, "1.0.0 → 1.1.0")
	assert.Contains(t, s, "2 decisions")
	assert.Contains(t, s, "1 drop")
	assert.Contains(t, s, "1 keep")
	assert.Contains(t, s, res.SHA256[:12])
	tbl := string(resultTable(t, res))
	assert.Contains(t, tbl, "follow #1")
	assert.Contains(t, tbl, "PATH")
}

// TestMergeLiveUnderUserScalar: a live rule below a path where the user has
// a scalar replaces that scalar with a map; the user's value must still get
// a decision (docs/design.md §5.7: every path where the user has a value gets one).
func TestMergeLiveUnderUserScalar(t *testing.T) {
	res := mustMerge(t, values.Input{
		User: vals(t, `{storageClass: legacy}`), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
		Rules: []values.Rule{liveRule(t, "storageClass.defaultStorageClass", "live", scRef, scExpr)},
		Live:  parseLive(t, liveObjects),
	})
	assert.Equal(t, vals(t, `{storageClass: {defaultStorageClass: false}}`), res.Values)
	assert.True(t, hasDecision(res, "storageClass"),
		"the user's storageClass: legacy disappears without a decision; decided: %v", decisionPaths(res))
}

// TestMergeDefaultsNotNormalized: Merge normalises U, the overrides and the
// live objects, but takes Dold and Dnew as given; defaults built in Go (int,
// not int64) then compare unequal to the same user number, and max/min find
// them not comparable (docs/design.md §5.4: numbers compare by value).
func TestMergeDefaultsNotNormalized(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, `{a: 1, b: 3}`),
		OldDefaults: map[string]any{"a": 1, "b": 1},
		NewDefaults: map[string]any{"a": 2, "b": 5},
		Rules:       rules(t, "follow:a", "max:b"),
	})
	assert.Equal(t, values.ActionDrop, decisionAt(t, res, "a").Action, "user 1 equals the old default 1")
	assert.Equal(t, values.ActionDrop, decisionAt(t, res, "b").Action, "user 3 < new default 5")
}

// A user key the new chart declares with a null default (Helm drops it
// from the defaults) is no orphan; one it does not declare still is.
func TestANullDefaultIsNoOrphan(t *testing.T) {
	in := values.Input{
		User:        map[string]any{"defaultSettings": map[string]any{"defaultDataPath": "/var/lib/harvester/defaultdisk", "typo": 1}},
		NewDefaults: map[string]any{"defaultSettings": map[string]any{"replicaCount": 3}},
		NewKeys:     map[string]any{"defaultSettings": map[string]any{"replicaCount": 3, "defaultDataPath": nil}},
	}
	res, err := values.Merge(in)
	require.NoError(t, err)
	var paths []string
	for _, w := range warningsOf(res, values.WarnOrphan) {
		paths = append(paths, w.Path)
	}
	assert.Equal(t, []string{"defaultSettings.typo"}, paths)

	in.NewKeys = nil // the defaults alone: both look orphaned
	res, err = values.Merge(in)
	require.NoError(t, err)
	assert.Len(t, warningsOf(res, values.WarnOrphan), 2)
}
