package values_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

var (
	scRef = values.ObjectRef{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: "harvester-longhorn"}
	// the expression of the live example in docs/policy.md
	scExpr     = `.metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"`
	secretRef  = values.ObjectRef{APIVersion: "v1", Kind: "Secret", Namespace: "harvester-system", Name: "webhook-tls"}
	secretExpr = `.data["tls.crt"]`
)

const liveObjects = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: harvester-longhorn
  annotations:
    storageclass.kubernetes.io/is-default-class: "false"
provisioner: driver.longhorn.io
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Secret
  metadata: {name: webhook-tls, namespace: harvester-system}
  data: {tls.crt: Q0VSVA==, tls.key: S0VZ}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: settings, namespace: harvester-system}
  data: {replicas: "3"}
`

func parseLive(t testing.TB, doc string) values.LiveObjects {
	t.Helper()
	live, err := values.ParseLive([]byte(doc))
	require.NoError(t, err)
	return live
}

func TestParseLive(t *testing.T) {
	live := parseLive(t, liveObjects)
	assert.Len(t, live, 3, "a List contributes its items")
	_, ok := live.Get(scRef)
	assert.True(t, ok)
	_, ok = live.Get(secretRef)
	assert.True(t, ok)
	_, ok = live.Get(values.ObjectRef{APIVersion: "v1", Kind: "Secret", Name: "webhook-tls"})
	assert.False(t, ok, "the namespace is part of the reference")

	_, err := values.ParseLive([]byte("apiVersion: v1\nkind: Secret\nmetadata: {}\n"))
	assert.ErrorContains(t, err, "document 1")
	_, err = values.ParseLive([]byte("---\napiVersion: v1\nkind: List\nitems: [1]\n"))
	assert.Error(t, err)
	live, err = values.ParseLive(nil)
	require.NoError(t, err)
	assert.Empty(t, live)
}

func TestMergeLive(t *testing.T) {
	live := parseLive(t, liveObjects)
	scRule := liveRule(t, "storageClass.defaultStorageClass", "live", scRef, scExpr)

	t.Run("value computed from the live object replaces the user's", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{storageClass: {defaultStorageClass: true}}`),
			OldDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			NewDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			Rules:       []values.Rule{scRule}, Live: live,
		})
		assert.Equal(t, vals(t, `{storageClass: {defaultStorageClass: false}}`), res.Values)
		d := decisionAt(t, res, "storageClass.defaultStorageClass")
		assert.Equal(t, values.ActionSet, d.Action)
		assert.Equal(t, values.PolicyLive, d.Policy)
		assert.Equal(t, 1, d.Rule)
		assert.Equal(t, set(false), d.Result)
		assert.Empty(t, res.Warnings)
	})

	t.Run("always written, even without a user value or equal to the default", func(t *testing.T) {
		on := parseLive(t, `{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: harvester-longhorn, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}}`)
		res := mustMerge(t, values.Input{
			User:        vals(t, `{}`),
			OldDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			NewDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			Rules:       []values.Rule{scRule}, Live: on,
		})
		assert.Equal(t, vals(t, `{storageClass: {defaultStorageClass: true}}`), res.Values)
		assert.Equal(t, values.ActionSet, decisionAt(t, res, "storageClass.defaultStorageClass").Action)
	})

	t.Run("written even where no values tree has the path", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User: vals(t, `{}`), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			Rules: []values.Rule{scRule}, Live: live,
		})
		assert.Equal(t, vals(t, `{storageClass: {defaultStorageClass: false}}`), res.Values)
	})

	t.Run("object missing: falls back to the user value and warns", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{storageClass: {defaultStorageClass: true}}`),
			OldDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			NewDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			Rules:       []values.Rule{scRule}, Live: values.LiveObjects{},
		})
		assert.Equal(t, vals(t, `{storageClass: {defaultStorageClass: true}}`), res.Values)
		assert.Equal(t, values.ActionKeep, decisionAt(t, res, "storageClass.defaultStorageClass").Action)
		assert.Equal(t, []string{"live-missing storageClass.defaultStorageClass"}, warningList(res))
		assert.Contains(t, res.Warnings[0].Message, "harvester-longhorn")
	})

	t.Run("object missing and no user value: nothing, and a warning", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User:        vals(t, `{}`),
			OldDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			NewDefaults: vals(t, `{storageClass: {defaultStorageClass: true}}`),
			Rules:       []values.Rule{scRule},
		})
		assert.Equal(t, map[string]any{}, res.Values)
		assert.Equal(t, []string{"live-missing storageClass.defaultStorageClass"}, warningList(res))
	})

	t.Run("expression null on the object: treated as missing", func(t *testing.T) {
		r := liveRule(t, "storageClass.reclaimPolicy", "live", scRef, `.reclaimPolicy`)
		res := mustMerge(t, values.Input{
			User:        vals(t, `{storageClass: {reclaimPolicy: Retain}}`),
			OldDefaults: vals(t, `{storageClass: {reclaimPolicy: Delete}}`),
			NewDefaults: vals(t, `{storageClass: {reclaimPolicy: Delete}}`),
			Rules:       []values.Rule{r}, Live: live,
		})
		assert.Equal(t, vals(t, `{storageClass: {reclaimPolicy: Retain}}`), res.Values)
		assert.Equal(t, []string{"live-missing storageClass.reclaimPolicy"}, warningList(res))
	})

	t.Run("a map computed from the object", func(t *testing.T) {
		r := liveRule(t, "settings", "live",
			values.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "harvester-system", Name: "settings"}, `.data`)
		res := mustMerge(t, values.Input{
			User: vals(t, `{settings: {replicas: "1", other: x}}`), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			Rules: []values.Rule{r}, Live: live,
		})
		assert.Equal(t, vals(t, `{settings: {replicas: "3"}}`), res.Values, "the live value replaces the subtree whole")
	})
}

func TestMergeOnce(t *testing.T) {
	live := parseLive(t, liveObjects)
	once := liveRule(t, "webhook.tls.cert", "once", secretRef, secretExpr)

	t.Run("live object has it: pinned", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User: vals(t, `{}`), OldDefaults: vals(t, `{webhook: {tls: {}}}`), NewDefaults: vals(t, `{webhook: {tls: {}}}`),
			Rules: []values.Rule{once}, Live: live,
		})
		assert.Equal(t, vals(t, `{webhook: {tls: {cert: Q0VSVA==}}}`), res.Values)
		d := decisionAt(t, res, "webhook.tls.cert")
		assert.Equal(t, values.ActionSet, d.Action)
		assert.Equal(t, values.PolicyOnce, d.Policy)
		assert.True(t, d.Secret, "a value read from a Secret is secret")
		assert.Empty(t, res.Warnings)

		// reports never show it
		red := res.Redacted()
		assert.Equal(t, set(values.Redaction), decisionAt(t, red, "webhook.tls.cert").Result)
		assert.NotContains(t, string(resultTable(t, res)), "Q0VSVA==")
		var doc struct {
			Decisions []map[string]any `json:"decisions"`
		}
		require.NoError(t, json.Unmarshal(resultJSON(t, res), &doc))
		require.Len(t, doc.Decisions, 1)
		assert.Equal(t, values.Redaction, doc.Decisions[0]["result"])
		assert.Equal(t, 1, strings.Count(string(resultJSON(t, res)), "Q0VSVA=="), "only in values, never in a decision")
		// the values themselves carry it: they are what gets applied
		assert.Contains(t, string(res.YAML), "Q0VSVA==")
	})

	t.Run("live object missing: left unset so the chart generates it", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User: vals(t, `{}`), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			Rules: []values.Rule{once}, Live: values.LiveObjects{},
		})
		assert.Equal(t, map[string]any{}, res.Values)
		d := decisionAt(t, res, "webhook.tls.cert")
		assert.Equal(t, values.ActionDefault, d.Action)
		assert.Equal(t, unset, d.Result)
		assert.Equal(t, []string{"live-missing webhook.tls.cert"}, warningList(res))
	})

	// docs/design.md §5.4 says once is "like live", whose missing object falls back to
	// the user value: a value the user gave explicitly survives.
	t.Run("live object missing, user value set: the user value is kept", func(t *testing.T) {
		res := mustMerge(t, values.Input{
			User: vals(t, `{webhook: {tls: {cert: USERCERT}}}`), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			Rules: []values.Rule{once},
		})
		assert.Equal(t, vals(t, `{webhook: {tls: {cert: USERCERT}}}`), res.Values)
		assert.Equal(t, []string{"live-missing webhook.tls.cert"}, warningList(res))
	})

	t.Run("live object without the key: left unset", func(t *testing.T) {
		r := liveRule(t, "webhook.tls.ca", "once", secretRef, `.data["ca.crt"]`)
		res := mustMerge(t, values.Input{
			User: vals(t, `{}`), OldDefaults: vals(t, `{}`), NewDefaults: vals(t, `{}`),
			Rules: []values.Rule{r}, Live: live,
		})
		assert.Equal(t, map[string]any{}, res.Values)
		assert.Equal(t, []string{"live-missing webhook.tls.ca"}, warningList(res))
	})
}

func TestLiveRuleValidation(t *testing.T) {
	p, err := values.ParsePattern("a.*")
	require.NoError(t, err)
	e, err := values.ParseExpr(".x")
	require.NoError(t, err)
	_, err = values.NewRule(p, values.PolicyLive, &scRef, e)
	assert.ErrorContains(t, err, "concrete", "live needs a concrete path")

	p, err = values.ParsePattern("a.b")
	require.NoError(t, err)
	_, err = values.NewRule(p, values.PolicyOnce, nil, e)
	assert.ErrorContains(t, err, "source")
	_, err = values.NewRule(p, values.PolicyLive, &scRef, nil)
	assert.ErrorContains(t, err, "expr")
	_, err = values.NewRule(p, values.PolicyLive, &values.ObjectRef{Kind: "StorageClass", Name: "x"}, e)
	assert.Error(t, err)
	_, err = values.NewRule(p, values.PolicyChart, &scRef, nil)
	assert.Error(t, err, "only live and once take a source")
	_, err = values.NewRule(p, values.PolicyChart, nil, e)
	assert.Error(t, err, "only live and once take an expr")

	_, err = values.ParseExpr("")
	assert.Error(t, err)
	_, err = values.ParseExpr(".a[")
	assert.Error(t, err)
}

func TestParsePolicyNames(t *testing.T) {
	for _, p := range values.Policies {
		got, err := values.ParsePolicy(string(p))
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	assert.Len(t, values.Policies, 11, "docs/design.md §5.4 lists eleven policies")
	_, err := values.ParsePolicy("prefer-magic")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"prefer-magic"`)
	assert.Contains(t, err.Error(), "follow", "the error lists the valid names")
}

func TestRedactedLeavesOriginalAlone(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, `{auth: {password: hunter2}, replicas: 3}`),
		NewDefaults: vals(t, `{auth: {password: ""}, replicas: 1}`),
	})
	red := res.Redacted()
	assert.Equal(t, set(values.Redaction), decisionAt(t, red, "auth.password").User)
	assert.Equal(t, set("hunter2"), decisionAt(t, res, "auth.password").User, "the original keeps the value")
	vals := res.RedactedValues()
	assert.Equal(t, values.Redaction, vals.Values["auth"].(map[string]any)["password"], "RedactedValues redacts the values too")
	assert.Equal(t, set(values.Redaction), decisionAt(t, vals, "auth.password").User)
	assert.Equal(t, int64(3), vals.Values["replicas"])
	assert.Equal(t, "hunter2", res.Values["auth"].(map[string]any)["password"], "the original's values are left alone")
	assert.Equal(t, "hunter2", red.Values["auth"].(map[string]any)["password"], "Redacted leaves the values: merge's product")
	assert.Equal(t, set(int64(3)), decisionAt(t, red, "replicas").User, "non-secret values are shown")
	var b bytes.Buffer
	require.NoError(t, res.WriteTable(&b))
	assert.NotContains(t, b.String(), "hunter2")
}

// A live rule's unless replaces one live value (a setting left at its
// old default) by another, or by the new chart's default, unless the user
// values set it; any other live value is kept. The report says which.
func TestMergeLiveUnless(t *testing.T) {
	settings := `
apiVersion: longhorn.io/v1beta2
kind: Setting
metadata: {name: node-drain-policy, namespace: longhorn-system}
value: %s
`
	ref := values.ObjectRef{APIVersion: "longhorn.io/v1beta2", Kind: "Setting", Namespace: "longhorn-system", Name: "node-drain-policy"}
	rule := liveRule(t, "longhorn.defaultSettings.nodeDrainPolicy", "live", ref, ".value")
	withThen, err := rule.WithUnless(values.Unless{Equals: "block-if-contains-last-replica", Then: "allow-if-replica-is-stopped"})
	require.NoError(t, err)
	withDefault, err := rule.WithUnless(values.Unless{Equals: "block-if-contains-last-replica", ThenDefault: true})
	require.NoError(t, err)
	defaults := vals(t, `{longhorn: {defaultSettings: {nodeDrainPolicy: from-the-chart}}}`)
	for _, tc := range []struct {
		name, live, user string
		rule             values.Rule
		want             any
		reason           string
	}{
		{"the old default moved", "block-if-contains-last-replica", `{}`, withThen, "allow-if-replica-is-stopped",
			"is block-if-contains-last-replica, the value unless replaces: set to allow-if-replica-is-stopped (unless.then)"},
		{"the old default, to the chart's", "block-if-contains-last-replica", `{}`, withDefault, nil,
			"the new chart's default applies (unless.thenDefault)"},
		{"the operator's choice kept", "always-allow", `{}`, withThen, "always-allow", "derived from live"},
		{"the user values set it", "block-if-contains-last-replica", `{longhorn: {defaultSettings: {nodeDrainPolicy: block-if-contains-last-replica}}}`, withThen,
			"block-if-contains-last-replica", "but the user values set it: user value kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustMerge(t, values.Input{User: vals(t, tc.user), OldDefaults: defaults, NewDefaults: defaults,
				Rules: []values.Rule{tc.rule}, Live: parseLive(t, strings.ReplaceAll(settings, "%s", tc.live))})
			got, _ := values.Lookup(res.Values, []string{"longhorn", "defaultSettings", "nodeDrainPolicy"})
			assert.Equal(t, tc.want, got)
			var reasons []string
			for _, d := range res.Decisions {
				reasons = append(reasons, d.Reason)
			}
			assert.Contains(t, strings.Join(reasons, "\n"), tc.reason)
		})
	}
	_, err = liveRule(t, "a", "once", ref, ".value").WithUnless(values.Unless{Equals: "x", Then: "y"})
	assert.ErrorContains(t, err, "only a live rule takes unless")
	_, err = rule.WithUnless(values.Unless{Equals: "x"})
	assert.ErrorContains(t, err, "one of the two")
}
