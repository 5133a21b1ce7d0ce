package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chartvalues "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
)

// hotfix is one field an operator changed on a live object: the field a
// change of one value of the chart renders differently, and the value
// the field then holds. The value changed is the truth provenance is
// measured against.
type hotfix struct {
	chart string
	value string // the value path changed
	id    provenance.ObjectID
	steps []any
	live  any
}

func (h hotfix) String() string {
	return fmt.Sprintf("%s: %s %s %s (from %s)", h.chart, h.id.Kind, h.id.Name, provenance.PathString(h.steps), h.value)
}

// TestProvenanceOnTheCorpus measures provenance over a corpus of charts
// written with the patterns of widely used public charts
// (testdata/corpus: an ingress controller shaped like traefik's and
// ingress-nginx's, a web server shaped like bitnami's, a storage system
// shaped like longhorn's, a dashboard server with a subchart shaped like
// grafana's). The hotfixes are generated, not chosen: every string and
// number among the chart's effective values (subcharts' included, nulls
// set to a string) is changed in turn and the chart rendered; each field
// that then renders differently is a hotfix whose live value is that
// render's. Each is read back from the render of the defaults.
//
//   - precision: of the answers given, those whose --set flags, parsed
//     with Helm's strvals, render the live value at the field;
//   - recall: of the hotfixes, those answered rightly.
//
// docs/performance.md holds the figures; the goals are issue 37's.
//
// PROVENANCE_CHARTS, a list of chart directories separated by the path
// list separator, measures those charts instead (scripts/provenance-recall:
// public charts fetched by hand, which the repository does not carry).
// One trace reads every hotfix of a chart, so they share its budget of
// conditional traces (provenance.MaxRetraces); PROVENANCE_TRACE_EACH set
// reads each with a trace of its own, as one drift run would.
func TestProvenanceOnTheCorpus(t *testing.T) {
	dirs := filepath.SplitList(os.Getenv("PROVENANCE_CHARTS"))
	traceEach := os.Getenv("PROVENANCE_TRACE_EACH") != ""
	if len(dirs) == 0 {
		entries, err := os.ReadDir(filepath.Join("testdata", "corpus"))
		require.NoError(t, err)
		for _, e := range entries {
			dirs = append(dirs, filepath.Join("testdata", "corpus", e.Name()))
		}
	}
	var cases, answered, right int
	var wrong, missed []string
	var rightly []hotfix
	reasons := map[string]int{}
	for _, dir := range dirs {
		c, err := Load(dir)
		require.NoError(t, err, dir)
		base, err := Trace(c, nil, "rel", "ns")
		require.NoError(t, err, dir)
		for _, h := range corpusHotfixes(t, c) {
			cases++
			if traceEach {
				// as one drift run reading this one hotfix: a trace of its
				// own, with its own budget of conditional traces
				base, err = Trace(c, nil, "rel", "ns")
				require.NoError(t, err, dir)
			}
			r := base.Read(h.id, h.steps, h.live, true, false)
			if !r.Mapped() {
				reasons[r.Reason]++
				missed = append(missed, h.String()+": "+r.Reason)
				continue
			}
			answered++
			got, err := renderWithFlags(c, r.Set, h)
			if err == nil && reflect.DeepEqual(got, h.live) {
				right++
				rightly = append(rightly, h)
				continue
			}
			wrong = append(wrong, fmt.Sprintf("%s: %v renders %#v (%v), not %#v", h, r.Set, got, err, h.live))
		}
	}
	require.Positive(t, cases)
	precision := float64(right) / float64(max(answered, 1))
	recall := float64(right) / float64(cases)
	t.Logf("%d hotfixes over %d charts: %d answered, %d rightly: precision %.2f, recall %.2f", cases, len(dirs), answered, right, precision, recall)
	for why, n := range reasons {
		t.Logf("unanswered, %d: %s", n, why)
	}
	sort.Strings(missed)
	for _, m := range missed {
		t.Logf("missed: %s", m)
	}
	assert.Empty(t, wrong, "answers that render something else")
	assert.Equal(t, 1.0, precision)
	assert.GreaterOrEqual(t, recall, 0.98)
	if os.Getenv("PROVENANCE_CHARTS") == "" {
		// each shape of issue 56 is among the hotfixes answered rightly
		for _, shape := range []struct{ name, value, kind, field string }{
			{"a digest dropped: @digest under if .digest, a digest in the defaults", "controller.image.digest", "Deployment", "spec.template.spec.containers[0].image"},
			{"a tag that falls back to appVersion in a helper joining registry and repository", "sidecars.fluentbit.image.tag", "Deployment", "spec.template.spec.containers[3].image"},
			{"an argument added through a map ranged into --key=value", "controller.extraArgs", "Deployment", "spec.template.spec.containers[0].args"},
			{"an argument added through a list ranged into args", "controller.additionalArguments", "Deployment", "spec.template.spec.containers[0].args"},
			{"conditional flags a switch adds", "metrics.enabled", "Deployment", "spec.template.spec.containers[0].args"},
			{"a container port a switch adds", "metrics.enabled", "Deployment", "spec.template.spec.containers[0].ports"},
			{"a Service port a switch adds", "metrics.enabled", "Service", "spec.ports"},
			{"a ConfigMap key from toYaml of a map, a key added", "controller.config", "ConfigMap", `data["config.yaml"]`},
			{"a Secret key from b64enc of a value with a random default", "auth.password", "Secret", "data.password"},
			{"a list joined, an element added", "controller.allowedHosts", "ConfigMap", "data.allowed-hosts"},
		} {
			found := slices.ContainsFunc(rightly, func(h hotfix) bool {
				return h.chart == "gateway" && h.value == shape.value && h.id.Kind == shape.kind && provenance.PathString(h.steps) == shape.field
			})
			assert.True(t, found, "no hotfix of the shape %q answered rightly", shape.name)
		}
	}
}

// corpusHotfixes are c's hotfixes: for each string, number and null among
// its effective values, the fields a change of it renders differently.
func corpusHotfixes(t *testing.T, c *chart.Chart) []hotfix {
	t.Helper()
	coalesced, err := chartvalues.CoalesceValues(c, map[string]any{})
	require.NoError(t, err)
	effective := map[string]any(coalesced)
	base := renderObjects(t, c, nil)
	// a field two renders of the same values render differently (a
	// certificate genCA makes) is no value's: no hotfix
	random := map[string]bool{}
	for id, obj := range renderObjects(t, c, nil) {
		diffLeaves(base[id], obj, nil, func(steps []any, _ any) {
			random[id.Kind+"/"+id.Name+provenance.PathString(steps)] = true
		})
	}
	// a digest of other rendered text (`checksum/config: {{ include … |
	// sha256sum }}`) is no hotfix either: no operator writes one by hand,
	// and a change to what it digests leaves it as it was
	digest := regexp.MustCompile(`^[0-9a-f]{64}$`)
	var out []hotfix
	eachChange(effective, nil, func(at []any, changed any) {
		user := setAt(copyMap(effective), at, changed).(map[string]any)
		objs, err := tryRenderObjects(c, user)
		if err != nil {
			return // the chart refuses such a value: no hotfix
		}
		var again map[provenance.ObjectID]map[string]any // a second render, for a field random at first
		for id, obj := range objs {
			old, ok := base[id]
			if !ok {
				continue
			}
			diffLeaves(old, obj, nil, func(steps []any, live any) {
				if random[id.Kind+"/"+id.Name+provenance.PathString(steps)] {
					// random as the chart renders it (a password
					// randAlphaNum makes when none is set): a hotfix when
					// the change renders it the same every time
					if again == nil {
						again, _ = tryRenderObjects(c, user)
					}
					if v, _ := provenance.At(again[id], steps); !reflect.DeepEqual(v, live) {
						return
					}
				}
				if was, _ := provenance.At(old, steps); digest.MatchString(fmt.Sprint(was)) {
					return
				}
				out = append(out, hotfix{chart: c.Name(), value: provenance.PathString(at), id: id, steps: steps, live: live})
			})
		}
	})
	return out
}

// eachChange calls f with each change an operator's hotfix stands for,
// at each value of v: a string, number or null changed (changedLeaf); a
// string a condition may test emptied (a digest dropped); a boolean
// flipped (a port a switch exposes); a list of strings given one more
// (an argument added to a list ranged into args); a map of scalars given
// one more key (a flag added to a map ranged into `--key=value`).
func eachChange(v any, at []any, f func([]any, any)) {
	here := func() []any { return append([]any{}, at...) }
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		scalars := true
		for k, e := range x {
			keys = append(keys, k)
			switch e.(type) {
			case map[string]any, []any:
				scalars = false
			}
		}
		sort.Strings(keys)
		if scalars && len(at) > 0 {
			added := copyMap(x)
			added["added-by-hand"] = "set-by-hand"
			f(here(), added)
		}
		for _, k := range keys {
			eachChange(x[k], append(here(), k), f)
		}
	case []any:
		strs := true
		for _, e := range x {
			if _, ok := e.(string); !ok {
				strs = false
			}
		}
		if strs {
			f(here(), append(append([]any{}, x...), "--added-by-hand"))
		}
		for i, e := range x {
			eachChange(e, append(here(), i), f)
		}
	case bool:
		f(here(), !x)
	default:
		if changed, ok := changedLeaf(v); ok {
			f(here(), changed)
		}
		if s, ok := v.(string); ok && s != "" {
			f(here(), "")
		}
	}
}

// changedLeaf is a value other than v that a template renders as it
// renders v's kind: a string with text added, a number plus seven, a
// string for a null. Booleans and the rest are not changed.
func changedLeaf(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return "set-by-hand", true
	case string:
		if x == "" {
			return "v9.9.9", true
		}
		return x + "-hotfix", true
	case int64:
		return x + 7, true
	case float64:
		return x + 7, true
	case int:
		return x + 7, true
	}
	return nil, false
}

func eachLeaf(v any, at []any, f func([]any, any)) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			eachLeaf(x[k], append(append([]any{}, at...), k), f)
		}
	case []any:
		for i, e := range x {
			eachLeaf(e, append(append([]any{}, at...), i), f)
		}
	default:
		f(at, v)
	}
}

func setAt(tree any, at []any, v any) any {
	if len(at) == 0 {
		return v
	}
	switch k := at[0].(type) {
	case string:
		m := tree.(map[string]any)
		m[k] = setAt(m[k], at[1:], v)
		return m
	case int:
		l := append([]any{}, tree.([]any)...)
		l[k] = setAt(l[k], at[1:], v)
		return l
	}
	return tree
}

// diffLeaves calls f for each leaf field of a that b holds with another
// value.
func diffLeaves(a, b any, at []any, f func([]any, any)) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return
		}
		for k, bv := range y {
			av, ok := x[k]
			if !ok {
				// a key the change adds (an annotation a switch adds)
				f(append(append([]any{}, at...), k), bv)
				continue
			}
			diffLeaves(av, bv, append(append([]any{}, at...), k), f)
		}
	case []any:
		y, ok := b.([]any)
		if !ok {
			return
		}
		if len(x) != len(y) {
			// elements added or dropped (a port, an argument): the list
			// is the field
			f(at, b)
			return
		}
		for i := range x {
			diffLeaves(x[i], y[i], append(append([]any{}, at...), i), f)
		}
	default:
		if _, isMap := b.(map[string]any); isMap {
			return
		}
		if _, isList := b.([]any); isList {
			return
		}
		if !reflect.DeepEqual(a, b) {
			f(at, b)
		}
	}
}

func renderObjects(t *testing.T, c *chart.Chart, vals map[string]any) map[provenance.ObjectID]map[string]any {
	t.Helper()
	objs, err := tryRenderObjects(c, vals)
	require.NoError(t, err)
	return objs
}

func tryRenderObjects(c *chart.Chart, vals map[string]any) (map[provenance.ObjectID]map[string]any, error) {
	ms, err := Renderer{}.render(c, vals, "rel", "ns", false)
	if err != nil {
		return nil, err
	}
	out := map[provenance.ObjectID]map[string]any{}
	for _, m := range ms {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(m.Content), &obj); err != nil {
			return nil, err
		}
		if obj == nil {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		kind, _ := obj["kind"].(string)
		name, _ := md["name"].(string)
		out[provenance.ObjectID{Kind: kind, Name: name}] = obj
	}
	return out, nil
}

// renderWithFlags is the field h names as c renders it with the --set
// flags of an answer, parsed as Helm parses them.
func renderWithFlags(c *chart.Chart, flags []string, h hotfix) (any, error) {
	user := map[string]any{}
	for _, flag := range flags {
		kind, kv, _ := strings.Cut(flag, " ")
		var err error
		switch kind {
		case "--set-string":
			err = strvals.ParseIntoString(kv, user)
		case "--set-json":
			err = strvals.ParseJSON(kv, user)
		default:
			err = strvals.ParseInto(kv, user)
		}
		if err != nil {
			return nil, err
		}
	}
	objs, err := tryRenderObjects(c, user)
	if err != nil {
		return nil, err
	}
	v, ok := provenance.At(objs[h.id], h.steps)
	if !ok {
		return nil, fmt.Errorf("not rendered")
	}
	return v, nil
}
