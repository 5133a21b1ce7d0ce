package health

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustCompile(t *testing.T, src string) *Expr {
	t.Helper()
	e, err := Compile(src)
	require.NoError(t, err, src)
	return e
}

func TestCompileRefusesWhatCELRefuses(t *testing.T) {
	for src, want := range map[string]string{
		"status.phase ==":          "Syntax error",
		"stat.phase == 'Deployed'": "undeclared reference to 'stat'",
		"status.phase":             "", // dyn: accepted, checked at evaluation
		"1 + 2":                    "not a bool",
		"  ":                       "empty expression",
		"version == 1":             "no matching overload",
	} {
		_, err := Compile(src)
		if want == "" {
			assert.NoError(t, err, src)
			continue
		}
		require.Error(t, err, src)
		assert.Contains(t, err.Error(), want, src)
	}
}

func TestSelectsNameTheObjectFieldsRead(t *testing.T) {
	e := mustCompile(t, "status.phase == 'Deployed' && status.observedKubeVirtVersion == status.targetKubeVirtVersion && has(metadata.labels) && values.image.tag == version")
	assert.Equal(t, []string{"metadata.labels", "status.observedKubeVirtVersion", "status.phase", "status.targetKubeVirtVersion"}, e.reads)
}

func obj(name string, gen, observed int64, status map[string]any) map[string]any {
	o := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "ns", "generation": gen}}
	if status != nil {
		if observed > 0 {
			status["observedGeneration"] = observed
		}
		o["status"] = status
	}
	return o
}

func gate(t *testing.T, current, failed, inProgress string) Gate {
	t.Helper()
	g := Gate{APIVersion: "example.com/v1", Kind: "Widget", MinCount: 1, Current: mustCompile(t, current)}
	if failed != "" {
		g.Failed = mustCompile(t, failed)
	}
	if inProgress != "" {
		g.InProgress = mustCompile(t, inProgress)
	}
	return g
}

func TestJudge(t *testing.T) {
	g := gate(t, "status.phase == 'Deployed' && status.version == version", "status.phase == 'Failed'", "status.phase == 'Deploying'")
	vars := Vars{Version: "2.0.0"}
	cases := []struct {
		name  string
		seen  Seen
		min   int
		state State
		why   string
	}{
		{"current", Seen{Objects: []map[string]any{obj("a", 2, 2, map[string]any{"phase": "Deployed", "version": "2.0.0"})}}, 1, Current, ""},
		{"stale status from before the change", Seen{Objects: []map[string]any{obj("a", 3, 2, map[string]any{"phase": "Deployed", "version": "2.0.0"})}}, 1, InProgress,
			"Widget ns/a: status.observedGeneration 2 is below metadata.generation 3"},
		{"a stale failure is in progress", Seen{Objects: []map[string]any{obj("a", 3, 2, map[string]any{"phase": "Failed"})}}, 1, InProgress, "below metadata.generation"},
		{"at the old version", Seen{Objects: []map[string]any{obj("a", 2, 2, map[string]any{"phase": "Deployed", "version": "1.0.0"})}}, 1, InProgress,
			`Widget ns/a: not current: status.phase == 'Deployed' && status.version == version is false (status.phase = "Deployed", status.version = "1.0.0")`},
		{"failed", Seen{Objects: []map[string]any{obj("a", 2, 2, map[string]any{"phase": "Deployed", "version": "2.0.0"}), obj("b", 1, 1, map[string]any{"phase": "Failed"})}}, 1, Failed,
			`Widget ns/b: failed: status.phase == 'Failed' (status.phase = "Failed")`},
		{"inProgress first", Seen{Objects: []map[string]any{obj("a", 1, 0, map[string]any{"phase": "Deploying"})}}, 1, InProgress, "Widget ns/a: in progress: status.phase == 'Deploying'"},
		{"no status yet", Seen{Objects: []map[string]any{obj("a", 1, 0, nil)}}, 1, InProgress, "cannot be evaluated yet (no such key: phase)"},
		{"too few", Seen{Objects: []map[string]any{obj("a", 2, 2, map[string]any{"phase": "Deployed", "version": "2.0.0"})}}, 2, InProgress, "1 Widget exist, at least 2 must"},
		{"none, none asked", Seen{}, 0, Current, ""},
		{"none", Seen{}, 1, InProgress, "0 Widgets exist, at least 1 must"},
		{"missing", Seen{Missing: []string{"Widget ns/x"}}, 1, InProgress, "Widget ns/x does not exist"},
		{"set unknown", Seen{Waiting: "the release's revision at 2.0.0 is not deployed yet"}, 0, InProgress, "not deployed yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := g
			g.MinCount = c.min
			v := Judge(g, c.seen, vars)
			assert.Equal(t, c.state, v.State, v.Why)
			if c.why == "" {
				assert.Empty(t, v.Why)
				return
			}
			require.NotEmpty(t, v.Why)
			assert.Contains(t, strings.Join(v.Why, "\n"), c.why)
		})
	}
}

func TestValuesAreVariablesAndNeverPrinted(t *testing.T) {
	g := gate(t, "status.image == values.image.repository + ':' + values.image.tag", "", "")
	vars := Vars{Values: map[string]any{"image": map[string]any{"repository": "r", "tag": "2"}, "password": "hunter2"}}
	assert.Equal(t, Current, Judge(g, Seen{Objects: []map[string]any{obj("a", 1, 1, map[string]any{"image": "r:2"})}}, vars).State)
	v := Judge(g, Seen{Objects: []map[string]any{obj("a", 1, 1, map[string]any{"image": "r:1"})}}, vars)
	assert.Equal(t, InProgress, v.State)
	assert.Contains(t, v.Line(), `status.image = "r:1"`)
	assert.NotContains(t, v.Line(), "hunter2")
}

func TestGateNames(t *testing.T) {
	sel, err := ParseSelector("longhorn.io/instance-manager-type=aio")
	require.NoError(t, err)
	g := Gate{APIVersion: "longhorn.io/v1beta2", Kind: "InstanceManager", Namespace: "longhorn-system", Selector: sel}
	assert.False(t, g.Rendered())
	assert.Equal(t, "InstanceManager longhorn.io/v1beta2 in longhorn-system (longhorn.io/instance-manager-type=aio)", g.String())
	assert.True(t, Gate{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt"}.Rendered())
	_, err = ParseSelector("a in (b")
	assert.ErrorContains(t, err, `bad label selector "a in (b"`)
}

// im is an instance manager of image on node, in state.
func im(name, node, image, state string) map[string]any {
	return map[string]any{"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
		"metadata": map[string]any{"name": name, "namespace": "longhorn-system", "labels": map[string]any{"longhorn.io/node": node}},
		"spec":     map[string]any{"image": image}, "status": map[string]any{"currentState": state}}
}

func node(name string) map[string]any {
	return map[string]any{"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": map[string]any{"name": name, "namespace": "longhorn-system"}}
}

// Harvester's wait for the instance managers: of the new image only (the
// filter), one running for each Longhorn node (each); the old image's
// managers, running, never satisfy it.
func TestJudgeFilterAndEach(t *testing.T) {
	key, err := CompileString("metadata.labels['longhorn.io/node']")
	require.NoError(t, err)
	g := Gate{APIVersion: "longhorn.io/v1beta2", Kind: "InstanceManager", Namespace: "longhorn-system", MinCount: 1,
		Current: mustCompile(t, "status.currentState == 'running'"),
		Filter:  mustCompile(t, "spec.image == values.image.repository + ':' + values.image.tag"),
		Each:    &Each{APIVersion: "longhorn.io/v1beta2", Kind: "Node", Namespace: "longhorn-system", Key: key}}
	vars := Vars{Values: map[string]any{"image": map[string]any{"repository": "longhornio/longhorn-instance-manager", "tag": "v1.7.2"}}}
	const old, new = "longhornio/longhorn-instance-manager:v1.6.2", "longhornio/longhorn-instance-manager:v1.7.2"
	nodes := []map[string]any{node("node-1"), node("node-2")}

	v := Judge(g, Seen{Groups: nodes, Objects: []map[string]any{im("a", "node-1", old, "running"), im("b", "node-2", old, "running")}}, vars)
	assert.Equal(t, InProgress, v.State, "the old image's managers are left out")
	assert.Equal(t, 2, v.LeftOut)
	assert.Equal(t, []string{"Node node-1: 0 current InstanceManagers, 1 needed", "Node node-2: 0 current InstanceManagers, 1 needed"}, v.Why)
	assert.Contains(t, v.Line(), "0/0 current (2 left out by the filter): Node node-1")

	v = Judge(g, Seen{Groups: nodes, Objects: []map[string]any{im("a", "node-1", old, "running"), im("b", "node-2", old, "running"),
		im("c", "node-1", new, "running"), im("d", "node-2", new, "starting")}}, vars)
	assert.Equal(t, InProgress, v.State, "node-2's new manager is late")
	assert.Equal(t, []string{"Node node-2: 0 current InstanceManagers, 1 needed"}, v.Why)

	v = Judge(g, Seen{Groups: nodes, Objects: []map[string]any{im("a", "node-1", old, "running"),
		im("c", "node-1", new, "running"), im("d", "node-2", new, "running")}}, vars)
	assert.Equal(t, Current, v.State, "one of the new image running on each node")
	assert.Equal(t, 2, v.Current)
}

// An expression whose value is not of its type (a comparison left out)
// is the spec's fault: BadExpr, naming it and the value; Probe finds it
// on the objects as they are.
func TestNotABool(t *testing.T) {
	g := gate(t, "status.phase", "", "")
	g.At = "spec.yaml:12: charts[1].wait.health[1]"
	o := obj("a", 1, 1, map[string]any{"phase": "Deployed"})
	v := Judge(g, Seen{Objects: []map[string]any{o}}, Vars{})
	assert.Equal(t, `spec.yaml:12: charts[1].wait.health[1]: the expression "status.phase" gives "Deployed", not a bool`, v.BadExpr)
	err := Probe(g, Seen{Objects: []map[string]any{o}}, Vars{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the expression "status.phase" gives "Deployed", not a bool`)
	assert.NoError(t, Probe(g, Seen{Objects: []map[string]any{obj("b", 1, 1, map[string]any{})}}, Vars{}), "a field not there yet is not the spec's fault")

	key, err := CompileString("metadata.generation")
	require.NoError(t, err, "dyn: checked at evaluation")
	g = gate(t, "true", "", "")
	g.Each = &Each{APIVersion: "v1", Kind: "Node", Key: key}
	v = Judge(g, Seen{Objects: []map[string]any{o}, Groups: []map[string]any{node("n")}}, Vars{})
	assert.Contains(t, v.BadExpr, `each.key: the expression "metadata.generation" gives 1, not a string`)
}

// An each that selects no object has no group: the gate is not current
// ("0/0 current" held vacuously before), it waits, saying so; a group
// that appears is judged as any.
func TestJudgeEachWithNoGroupWaits(t *testing.T) {
	key, err := CompileString("metadata.labels['longhorn.io/node']")
	require.NoError(t, err)
	g := Gate{APIVersion: "longhorn.io/v1beta2", Kind: "InstanceManager", Namespace: "longhorn-system", MinCount: 1,
		Current: mustCompile(t, "status.currentState == 'running'"),
		Each:    &Each{APIVersion: "longhorn.io/v1beta2", Kind: "Node", Namespace: "longhorn-sytem", Key: key}}
	const img = "longhornio/longhorn-instance-manager:v1.7.2"

	v := Judge(g, Seen{}, Vars{})
	assert.Equal(t, InProgress, v.State, "no group, no object: nothing to wait for is not current")
	assert.Equal(t, []string{"each Node longhorn.io/v1beta2 in longhorn-sytem selects no object: no group to judge the gate in"}, v.Why)
	assert.Equal(t, "gate InstanceManager longhorn.io/v1beta2 in longhorn-system, each Node longhorn.io/v1beta2 in longhorn-sytem: in progress, 0/0 current: "+
		"each Node longhorn.io/v1beta2 in longhorn-sytem selects no object: no group to judge the gate in", v.Line())

	v = Judge(g, Seen{Objects: []map[string]any{im("a", "node-1", img, "running")}}, Vars{})
	assert.Equal(t, InProgress, v.State, "every object current, but no group")
	assert.Equal(t, 1, v.Current)
	assert.Contains(t, v.Line(), "in progress, 1/1 current: each Node longhorn.io/v1beta2 in longhorn-sytem selects no object")

	v = Judge(g, Seen{Groups: []map[string]any{node("node-1")}, Objects: []map[string]any{im("a", "node-1", img, "running")}}, Vars{})
	assert.Equal(t, Current, v.State, "once the group is there")
}

// A filter that cannot be evaluated on an object for another reason than
// a field the object lacks (here a label that is not a number) is not
// counted out: the gate cannot be judged (BadExpr, exit 2), naming the
// gate, the filter, the object and CEL's error; Probe finds it on the
// objects as they are. An object that lacks the label is left out, as
// one the filter is false of.
func TestFilterErrorIsReported(t *testing.T) {
	g := gate(t, "status.phase == 'Deployed'", "", "")
	g.At = "spec.yaml:14: charts[1].wait.health[2]"
	g.Filter = mustCompile(t, "int(metadata.labels['rank']) >= 2")
	ranked := func(name, rank string) map[string]any {
		o := obj(name, 1, 1, map[string]any{"phase": "Deployed"})
		if rank != "" {
			o["metadata"].(map[string]any)["labels"] = map[string]any{"rank": rank}
		}
		return o
	}

	v := Judge(g, Seen{Objects: []map[string]any{ranked("a", "2"), ranked("b", "1"), ranked("c", "")}}, Vars{})
	assert.Equal(t, Current, v.State, v.Why)
	assert.Empty(t, v.BadExpr, "an object without the label is left out, not an error")
	assert.Equal(t, 2, v.LeftOut)
	assert.Equal(t, 1, v.Objects)

	bad := []map[string]any{ranked("a", "2"), ranked("b", "two")}
	const want = `spec.yaml:14: charts[1].wait.health[2]: filter: the expression "int(metadata.labels['rank']) >= 2" cannot be evaluated on Widget ns/b: ` +
		`type conversion error from 'string' to 'int'`
	v = Judge(g, Seen{Objects: bad}, Vars{})
	assert.Equal(t, want, v.BadExpr, "not left out silently")
	assert.NotEqual(t, Current, v.State)
	assert.Contains(t, v.Line(), want)

	err := Probe(g, Seen{Objects: bad}, Vars{})
	require.Error(t, err, "at preflight too")
	assert.Equal(t, want, err.Error())
	assert.NoError(t, Probe(g, Seen{Objects: []map[string]any{ranked("c", "")}}, Vars{}), "a label not there is not the spec's fault")
}
