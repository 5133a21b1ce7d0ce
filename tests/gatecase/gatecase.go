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

// Versions are the chart's versions: 4.0.0's Widget fails (fail: true).
var Versions = []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"}

// WriteCharts writes the gated chart at every version into dir.
func WriteCharts(dir string) error {
	for _, v := range Versions {
		c := testchart.ConfigMapChart(Chart, v, map[string]any{"a": "x"})
		c.Values["fail"] = v == "4.0.0"
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

	// a failed gate ends the wait at once: exit 1, not the timeout's 4
	r = h.Run("upgrade", "--spec", spec, "--version", "4.0.0")
	r.RequireCode(t, outcome.ExitFailure)
	assert.Contains(t, r.Stderr, "a health gate failed: gate Widget gates.example.com/v1 (the release's): failed")
	assert.Contains(t, r.Stderr, fmt.Sprintf(`Widget %s/%s: failed: status.phase == 'Failed' (status.phase = \"Failed\")`, h.Namespace, h.Widget))
}
