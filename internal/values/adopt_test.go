package values_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

func adoption(value any, keys ...string) values.Adoption {
	return values.Adoption{Keys: keys, Value: value, Object: "Deployment demo/web", Field: ".spec.x", Manager: "kubectl-set", Rendered: "1"}
}

func TestAdoptTakesTheLiveValueOfAChangedField(t *testing.T) {
	in := values.Input{
		User:        vals(t, "web: {image: {tag: '1'}}"),
		OldDefaults: vals(t, "{web: {image: {repository: r, tag: '1'}, replicas: 1}, config: {retention: 7d}}"),
		NewDefaults: vals(t, "{web: {image: {repository: r, tag: '2'}, replicas: 1}, config: {retention: 7d}}"),
		Rules:       rules(t, "adopt:**.image.tag", "adopt:web.replicas", "adopt:config"),
		Adopt: []values.Adoption{adoption("1-hotfix", "web", "image", "tag"), adoption(int64(3), "web", "replicas"),
			adoption("30d", "config", "retention"), adoption("r2", "web", "image", "repository")},
	}
	res := mustMerge(t, in)
	tag := decisionAt(t, res, "web.image.tag")
	require.Equal(t, values.ActionAdopt, tag.Action)
	require.Contains(t, tag.Reason, "kubectl-set")
	require.Contains(t, tag.Reason, `the user value was "1"`)
	require.Equal(t, "1-hotfix", res.Values["web"].(map[string]any)["image"].(map[string]any)["tag"])
	// a path no user value and no tree had before is written too
	require.Equal(t, values.ActionAdopt, decisionAt(t, res, "web.replicas").Action)
	require.EqualValues(t, 3, res.Values["web"].(map[string]any)["replicas"])
	// an ancestor's adopt rule decides the leaf
	require.Equal(t, "30d", res.Values["config"].(map[string]any)["retention"])
	// a path no adopt rule decides is not adopted
	_, has := res.Values["web"].(map[string]any)["image"].(map[string]any)["repository"]
	require.False(t, has)
	require.Empty(t, warningsOf(res, values.WarnAdopt))
}

func TestAdoptWithNoLiveChangeIsUser(t *testing.T) {
	base := values.Input{
		User:        vals(t, "web: {image: {tag: '1'}}"),
		OldDefaults: vals(t, "web: {image: {tag: '1'}}"),
		NewDefaults: vals(t, "web: {image: {tag: '2'}}"),
	}
	user := mustMerge(t, base)
	base.Rules = rules(t, "adopt:**.image.tag")
	adopt := mustMerge(t, base)
	require.Equal(t, user.Values, adopt.Values)
	require.Equal(t, values.ActionKeep, decisionAt(t, adopt, "web.image.tag").Action)
}

func TestAdoptWarnsAndAdoptsNothingItCannot(t *testing.T) {
	in := values.Input{
		User:        vals(t, "{}"),
		NewDefaults: vals(t, "web: {image: {tag: '2'}}"),
		Rules:       rules(t, "adopt:nothing.here", "adopt:web.image.tag"),
		Adopt: []values.Adoption{adoption("a", "web", "image", "tag"),
			{Keys: []string{"web", "image", "tag"}, Value: "b", Object: "Deployment demo/other", Field: ".spec.y", Manager: "kubectl-edit"}},
	}
	res := mustMerge(t, in)
	w := warningsOf(res, values.WarnAdopt)
	require.Len(t, w, 2)
	require.Contains(t, w[0].Message+w[1].Message, "rule 1 (adopt) matches no value of the new chart")
	require.Contains(t, w[0].Message+w[1].Message, "want different values")
	require.NotContains(t, res.Values, "web")
}

func TestAdoptedSecretIsRedacted(t *testing.T) {
	res := mustMerge(t, values.Input{
		User:        vals(t, "auth: {password: old}"),
		NewDefaults: vals(t, "auth: {password: ''}"),
		Rules:       rules(t, "adopt:auth.password"),
		Adopt:       []values.Adoption{adoption("s3cret-live", "auth", "password")},
	})
	d := decisionAt(t, res, "auth.password")
	require.Equal(t, values.ActionAdopt, d.Action)
	require.NotContains(t, d.Reason, "s3cret-live")
	require.NotContains(t, d.Reason, "old")
}

// A map adopted whole (a ConfigMap key toYaml writes from it, a key
// added live) is decided at its path, with the live keys, not key by key
// against the new defaults.
func TestAdoptOfAWholeMap(t *testing.T) {
	in := values.Input{
		OldDefaults: vals(t, "config: {keep-alive: '75', workers: '4'}"),
		NewDefaults: vals(t, "config: {keep-alive: '75', workers: '8'}"),
		Rules:       rules(t, "adopt:config"),
		Adopt:       []values.Adoption{adoption(map[string]any{"keep-alive": "75", "workers": "4", "ssl-protocols": "TLSv1.3"}, "config")},
	}
	res := mustMerge(t, in)
	require.Equal(t, values.ActionAdopt, decisionAt(t, res, "config").Action)
	require.Equal(t, map[string]any{"keep-alive": "75", "workers": "4", "ssl-protocols": "TLSv1.3"}, res.Values["config"])
}
