// Package gatecase is the end-to-end scenario of the health gates
// (wait.health), the same for every target kind: a chart of the tests'
// own ("gated": the operator's two CRDs in crds/, a Widget and a
// ConfigMap), the operator of package operator acting on it, and the
// upgrades that must wait for it, fail on it, time out on it and resume.
// Each kind's test gives a Harness: where the chart is deployed and how to
// run chart-upgrader there as the kind's Plan ServiceAccount.
package gatecase

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/operator"
	"github.com/chart-upgrader/chart-upgrader/tests/rbaccheck"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// Chart is the gated chart's name.
const Chart = "gated"

// Versions are the chart's versions: 4.0.0's Widget fails (fail: true);
// 3.0.1's Widget has 3.0.0's spec (its generation does not move, as
// KubeVirt's object in a release that changes only virt-operator's
// image), and its values name the operator version 3.0.1.
var Versions = []string{"1.0.0", "2.0.0", "3.0.0", "3.0.1", "4.0.0"}

// WriteCharts writes the gated chart at every version into dir.
func WriteCharts(dir string) error {
	for _, v := range Versions {
		c := testchart.ConfigMapChart(Chart, v, map[string]any{"a": "x"})
		c.Values["fail"] = v == "4.0.0"
		c.Values["operatorVersion"] = v
		if v == "3.0.1" {
			c.Values["widgetVersion"] = "3.0.0"
		}
		c.Templates["widget.yaml"] = operator.WidgetTemplate
		c.CRDs = map[string]string{"gates.yaml": operator.CRDs}
		if _, err := testchart.Write(dir, c); err != nil {
			return err
		}
	}
	return nil
}

// Gates are the spec lines of the two gates (under a chart entry): the
// release's Widget, Deployed; and at least two of the operator's Parts
// in namespace, running at the version upgraded to.
func Gates(namespace string) string {
	return `  wait:
    timeout: 2m
    health:
    - apiVersion: gates.example.com/v1
      kind: Widget
      current: "status.phase == 'Deployed'"
      failed: "status.phase == 'Failed'"
    - apiVersion: gates.example.com/v1
      kind: WidgetPart
      namespace: ` + namespace + `
      selector: "` + operator.PartLabel + `=true"
      minCount: 2
      current: "status.state == 'running' && spec.version == version"
`
}

// Start creates the operator's CRDs (as its own chart would, before the
// gated chart is installed) and starts the operator on namespace for the
// test: 500 ms before each write, two Parts a Widget.
func Start(t *testing.T, env *testenv.Env, namespace string) *operator.Operator {
	t.Helper()
	for _, crd := range rbaccheck.Decode(t, operator.CRDs) {
		_, err := env.Dynamic().Resource(crds.GVR).Create(t.Context(), crd, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool {
		_, err := env.Dynamic().Resource(operator.PartGVR).Namespace(namespace).List(t.Context(), metav1.ListOptions{})
		_, err2 := env.Dynamic().Resource(operator.WidgetGVR).Namespace(namespace).List(t.Context(), metav1.ListOptions{})
		return err == nil && err2 == nil
	}, time.Minute, 50*time.Millisecond, "the operator's CRDs are served")
	op := &operator.Operator{Dynamic: env.Dynamic(), Namespace: namespace, Delay: 500 * time.Millisecond, Parts: 2}
	require.NoError(t, op.Start(t.Context()))
	return op
}

// Harness is a kind's side of the scenario.
type Harness struct {
	T         *testing.T
	Env       *testenv.Env
	Operator  *operator.Operator
	Namespace string // the release's, the operator's
	Widget    string // the name of the release's Widget
	Target    string // KIND/NAMESPACE/NAME
	// Spec writes a spec of the target with the chart entry's extra lines
	// and returns its path.
	Spec func(extra string) string
	// Run runs chart-upgrader as the kind's Plan ServiceAccount, on one
	// node (one journal).
	Run func(command string, args ...string) noderun.Result
	// Applies counts the writes of the target so far.
	Applies func() int
	// Timeout is the spec lines that let an upgrade time out without
	// undoing its apply (a release's rollbackOnFailure: false); "" none.
	Timeout string
}

// WaitDeployed waits until the operator made the Parts of version.
func (h Harness) WaitDeployed(version string) {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(h.T.Context(), 2*time.Minute)
	defer cancel()
	for {
		n := 0
		for _, w := range h.Operator.Writes() {
			if strings.HasPrefix(w.What, "WidgetPart ") && strings.HasSuffix(w.What, " running "+version) {
				n++
			}
		}
		if n >= 2 {
			return
		}
		select {
		case <-h.Operator.Wrote():
		case <-ctx.Done():
			h.T.Fatalf("the operator did not deploy %s: %v", version, h.Operator.Writes())
		}
	}
}

func (h Harness) widget() *unstructured.Unstructured {
	h.T.Helper()
	u, err := h.Env.Dynamic().Resource(operator.WidgetGVR).Namespace(h.Namespace).Get(h.T.Context(), h.Widget, metav1.GetOptions{})
	require.NoError(h.T, err)
	return u
}

// Run runs the scenario on a target the harness deployed at 1.0.0 (and
// the operator made its Parts of).
func Run(h Harness) {
	t := h.T
	gates := Gates(h.Namespace)

	// bad input: exit 2, nothing written
	applies := h.Applies()
	for _, c := range []struct{ name, spec, want string }{
		{"CEL that does not compile", strings.Replace(gates, `status.phase == 'Deployed'"`, `status.phase ==="`, 1), "wait.health[1].current: the CEL expression"},
		{"an unknown variable", strings.Replace(gates, `status.phase == 'Failed'`, `object.status.phase == 'Failed'`, 1), "undeclared reference to 'object'"},
		{"an unknown field", strings.Replace(gates, "      minCount: 2\n", "      minCount: 2\n      ready: true\n", 1), "wait.health[2].ready: unknown field"},
		{"a selector that does not parse", strings.Replace(gates, operator.PartLabel+"=true", "a in (b", 1), `wait.health[2].selector: bad label selector "a in (b"`},
		{"a kind the cluster does not serve", strings.Replace(gates, "kind: WidgetPart", "kind: Sprocket", 1), "the cluster does not serve Sprocket gates.example.com/v1, and no CRD this upgrade applies defines it"},
		{"a filter that does not compile", strings.Replace(gates, "      minCount: 2\n", "      minCount: 2\n      filter: \"spec.version ==\"\n", 1), "wait.health[2].filter: the CEL expression"},
		{"a group key that is not a string", strings.Replace(gates, "      minCount: 2\n", "      minCount: 2\n      each: {apiVersion: gates.example.com/v1, kind: Widget, key: \"1 + 1\"}\n", 1),
			`wait.health[2].each.key: the CEL expression "1 + 1" does not compile to a string`},
		{"a comparison left out, on the objects as they are", strings.Replace(gates, `current: "status.phase == 'Deployed'"`, `current: "status.phase"`, 1),
			`wait.health[1]: the expression "status.phase" gives "Deployed", not a bool`},
	} {
		r := h.Run("upgrade", "--spec", h.Spec(c.spec), "--version", "2.0.0")
		r.RequireCode(t, outcome.ExitBadInput)
		assert.Contains(t, r.Stderr, c.want, c.name)
		assert.Contains(t, r.Stderr, "spec.yaml:", "%s: the error names the file and line", c.name)
		assert.Equal(t, applies, h.Applies(), "%s: nothing written", c.name)
	}

	// the upgrade ends only after the operator's last write, though the
	// Widget was Deployed (at 1.0.0) when it began
	before := h.widget()
	phase, _, _ := unstructured.NestedString(before.Object, "status", "phase")
	require.Equal(t, "Deployed", phase, "a status from before the apply")
	spec := h.Spec(gates + h.Timeout)
	start := len(h.Operator.Writes())
	r := h.Run("upgrade", "--spec", spec, "--version", "2.0.0")
	exit := time.Now()
	r.RequireCode(t, 0)
	writes := h.Operator.Writes()[start:]
	require.NotEmpty(t, writes, "the operator acted on the upgrade")
	last := writes[len(writes)-1]
	assert.True(t, strings.HasPrefix(last.What, "WidgetPart ") && strings.HasSuffix(last.What, "running 2.0.0"), "the last write: %v", writes)
	assert.True(t, exit.After(last.At), "the exit follows the operator's last write (%v)", writes)
	t.Logf("the exit followed the operator's last write by %s", exit.Sub(last.At))
	assert.Contains(t, r.Stderr, "gate WidgetPart gates.example.com/v1 in "+h.Namespace, "the progress line names the gate waited on")
	assert.Equal(t, applies+1, h.Applies())

	// a re-run: nothing to do; status shows the gates
	r = h.Run("upgrade", "--spec", spec, "--version", "2.0.0")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "nothing to do")
	assert.Equal(t, applies+1, h.Applies())
	st := h.Run("status", "--target", h.Target)
	st.RequireCode(t, 0)
	assert.Contains(t, st.Stdout, "gate Widget gates.example.com/v1 (the release's): current, 1/1 current")
	assert.Contains(t, st.Stdout, "gate WidgetPart gates.example.com/v1 in "+h.Namespace+" ("+operator.PartLabel+"=true): current, 2/2 current")

	// the timeout names the gate still open and why; a re-run resumes the
	// wait without a second apply
	h.Operator.HoldParts()
	r = h.Run("upgrade", "--spec", spec, "--version", "3.0.0", "--timeout", "5s")
	r.RequireCode(t, outcome.ExitTimeout)
	assert.Contains(t, r.Stderr, "gate WidgetPart gates.example.com/v1 in "+h.Namespace+" ("+operator.PartLabel+"=true): in progress, 0/2 current")
	assert.Contains(t, r.Stderr, `spec.version = \"2.0.0\"`, "the value it read")
	assert.Equal(t, applies+2, h.Applies())
	h.Operator.ReleaseParts()
	r = h.Run("upgrade", "--spec", spec, "--version", "3.0.0")
	r.RequireCode(t, 0)
	assert.Equal(t, applies+2, h.Applies(), "the re-run waited, it did not apply again")

	staleAndPerGroup(h)

	// a failed gate ends the wait at once: exit 1, not the timeout's 4
	r = h.Run("upgrade", "--spec", spec, "--version", "4.0.0")
	r.RequireCode(t, outcome.ExitFailure)
	assert.Contains(t, r.Stderr, "a health gate failed: gate Widget gates.example.com/v1 (the release's): failed")
	assert.Contains(t, r.Stderr, fmt.Sprintf(`Widget %s/%s: failed: status.phase == 'Failed' (status.phase = \"Failed\")`, h.Namespace, h.Widget))
}

// GroupLabel, NodeLabel and IMLabel label the WidgetParts staleAndPerGroup
// makes: a "node" (GroupLabel=node), and an "instance manager" of a node
// (IMLabel=true, NodeLabel=<node>).
const (
	GroupLabel = "example.com/group"
	NodeLabel  = "example.com/node"
	IMLabel    = "example.com/im"
)

// perGroup is the gate of Harvester's instance managers on WidgetParts:
// those of the new image (filter), one running for each "node" (each).
func perGroup(namespace, filter string) string {
	return `    - apiVersion: gates.example.com/v1
      kind: WidgetPart
      namespace: ` + namespace + `
      selector: "` + IMLabel + `=true"
      filter: "` + filter + `"
      each: {apiVersion: gates.example.com/v1, kind: WidgetPart, namespace: ` + namespace + `, selector: "` + GroupLabel + `=node", key: "metadata.labels['` + NodeLabel + `']"}
      current: "status.state == 'running'"
`
}

// staleAndPerGroup is Harvester's two waits the gates could not say
// before: 3.0.1 leaves the Widget's spec as 3.0.0's (its generation
// stays: KubeVirt's object when only virt-operator's image changes), so
// its status from before, Deployed, satisfies a gate comparing the
// status with itself; the gate asks for the release's operator version
// (values) instead, and holds until the "new operator" reports it. And
// instance managers of two images on two nodes, one node's new one late:
// the wait ends only when each node has one of the new image running.
// Then a filter that leaves every object out keeps the gate open, and
// the timeout says so; an expression that gives a string where a bool
// belongs ends the wait at once with exit 2 and the value.
func staleAndPerGroup(h Harness) {
	t := h.T
	ctx := t.Context()
	parts := h.Env.Dynamic().Resource(operator.PartGVR).Namespace(h.Namespace)
	// mk makes a WidgetPart, and returns when its last write (the status,
	// when it has one) was sent: an object is current from that write on,
	// so nothing that waits for it can have seen it before then
	mk := func(name string, labels map[string]string, image, state string) time.Time {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gates.example.com/v1", "kind": "WidgetPart",
			"metadata": map[string]any{"name": name, "namespace": h.Namespace}, "spec": map[string]any{"image": image}}}
		u.SetLabels(labels)
		sent := time.Now()
		created, err := parts.Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
		if state != "" {
			created.Object["status"] = map[string]any{"state": state}
			sent = time.Now()
			_, err = parts.UpdateStatus(ctx, created, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		return sent
	}
	for _, n := range []string{"node-1", "node-2"} {
		mk(n, map[string]string{GroupLabel: "node"}, "", "")
		mk("im-old-"+n, map[string]string{IMLabel: "true", NodeLabel: n}, "im:3.0.0", "running")
	}
	mk("im-new-node-1", map[string]string{IMLabel: "true", NodeLabel: "node-1"}, "im:3.0.1", "running")

	widget := `    - apiVersion: gates.example.com/v1
      kind: Widget
      current: "status.phase == 'Deployed' && status.operatorVersion == values.operatorVersion"
`
	spec := h.Spec("  wait:\n    timeout: 2m\n    health:\n" + widget + perGroup(h.Namespace, "spec.image == 'im:' + version") + h.Timeout)
	applies, generation := h.Applies(), h.widget().GetGeneration()
	// the run's end is taken when it returned, not when the test got to
	// read it: an exit before node-2's new instance manager stays before it
	type ended struct {
		noderun.Result
		at time.Time
	}
	done := make(chan ended, 1)
	go func() {
		r := h.Run("upgrade", "--spec", spec, "--version", "3.0.1")
		done <- ended{r, time.Now()}
	}()
	require.Eventually(t, func() bool { return h.Applies() > applies }, 2*time.Minute, 50*time.Millisecond, "the upgrade to 3.0.1 applies")
	assert.Equal(t, generation, h.widget().GetGeneration(), "3.0.1 leaves the Widget's spec, and its generation, as they were")
	require.Never(t, func() bool { return len(done) > 0 }, 2*time.Second, 50*time.Millisecond,
		"the Widget's status from before (Deployed, the generation unchanged) does not end the wait")

	// the new operator reports its version
	w := h.widget()
	w.Object["status"].(map[string]any)["operatorVersion"] = "3.0.1"
	_, err := h.Env.Dynamic().Resource(operator.WidgetGVR).Namespace(h.Namespace).UpdateStatus(ctx, w, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Never(t, func() bool { return len(done) > 0 }, 2*time.Second, 50*time.Millisecond,
		"node-2 has no instance manager of the new image yet: the old one, running, does not count")
	late := mk("im-new-node-2", map[string]string{IMLabel: "true", NodeLabel: "node-2"}, "im:3.0.1", "running")
	e := <-done
	r := e.Result
	r.RequireCode(t, 0)
	assert.True(t, e.at.After(late), "the exit (%s) follows node-2's new instance manager's running status (written from %s)",
		e.at.Format(time.StampMicro), late.Format(time.StampMicro))
	assert.Contains(t, r.Stderr, "WidgetPart node-2: 0 current WidgetParts, 1 needed", "the progress line names the group waited on")
	assert.Contains(t, r.Stderr, "(2 left out by the filter)", "the progress line says how many the filter left out")

	// a filter that leaves every object out keeps the gate open
	r = h.Run("upgrade", "--spec", h.Spec("  wait:\n    health:\n"+perGroup(h.Namespace, "spec.image == 'nope'")+h.Timeout), "--version", "3.0.1", "--timeout", "5s")
	r.RequireCode(t, outcome.ExitTimeout)
	assert.Contains(t, r.Stderr, "(4 left out by the filter): WidgetPart node-1: 0 current WidgetParts, 1 needed")

	// a comparison left out, met during the wait: exit 2 at once, with
	// the value it gave
	r = h.Run("upgrade", "--spec", h.Spec("  wait:\n    health:\n    - apiVersion: gates.example.com/v1\n      kind: Widget\n      current: \"status.operatorVersion\"\n"+h.Timeout),
		"--version", "3.0.1", "--timeout", "1m")
	r.RequireCode(t, outcome.ExitBadInput)
	assert.Contains(t, r.Stderr, `the expression \"status.operatorVersion\" gives \"3.0.1\", not a bool`)
}
