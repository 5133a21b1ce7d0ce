package e2erollout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/kubelet"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// podCase is one upgrade whose new pods the test kubelet holds in a
// node's failure (kubelet.Mode): the wait ends with exit 1 within the
// grace, naming the pod and why (says, each), or, for a control (says
// empty), the upgrade succeeds.
type podCase struct {
	name  string
	mode  string
	grace string // --pod-failure-grace
	says  []string
}

var podCases = []podCase{
	{"a pull that fails on the node's disk", kubelet.ModeDiskFull, "3s",
		[]string{"cannot start version 2.0.0: pod ", "container web, image " /* the image follows */, "no space left on device", "for 3s (wait.podFailureGrace)"}},
	{"a container that crash-loops", kubelet.ModeCrashLoop, "3s",
		[]string{"container web", ": CrashLoopBackOff: back-off ", "last exit code 2 after ", "restarts: panic: invalid configuration: listen.port must be a number"}},
	{"a ConfigMap key missing", kubelet.ModeConfigError, "3s",
		[]string{"container web", ": CreateContainerConfigError: couldn't find key missing-key in ConfigMap "}},
	{"ImagePullBackOff for less than the grace, then it runs", kubelet.ModeBriefBackOff, "10s", nil},
}

// An upgrade whose new pods cannot start ends its wait at once, exit 1,
// naming the pod, container, image, reason and the kubelet's message, as
// each kind's Plan ServiceAccount (the pods' list and watch, and the
// ReplicaSets' get, derived by plan --check-chart); the release is
// rolled back; a re-run tries again and ends the same. A pod that
// recovers within the grace does not end it.
func TestAPodThatCannotStartEndsTheWait(t *testing.T) {
	env := testenv.ForTest(t)
	shared(t, env)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range podCases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					env := testenv.ForTest(t)
					ns := env.Namespace(t)
					chart, rel := name("p"), name("rel")
					writeCharts(t, chart, map[string]any{"replicas": 1,
						"podAnnotations": map[string]any{testenv.HoldAnnotation: testenv.HoldPull, kubelet.Mode: tc.mode}})
					run, _ := k.run(t, env, chart, ns, rel)
					start := time.Now()
					r := run("upgrade", "--pod-failure-grace", tc.grace, "--timeout", "90s")
					took := time.Since(start)
					if tc.says == nil {
						r.RequireCode(t, 0)
						return
					}
					r.RequireCode(t, outcome.ExitFailure)
					for _, s := range tc.says {
						assert.Contains(t, r.Stderr, s)
					}
					assert.Contains(t, r.Stderr, images.origin.Host+"/app:1.0.0", "the image is named")
					assert.Less(t, took, 60*time.Second, "the wait ends within the grace plus the rollout, not at its timeout: %s", took)
					assert.Contains(t, r.Stderr, `"progress":"ready `, "the progress line")
					assert.True(t, strings.Contains(r.Stderr, "cannot start: pod "), "the progress line shows the failing pod")
					if k.name == "release" {
						assert.Contains(t, r.Stderr, "rolled back", "a release rolls back as after a stall")
					}
					again := run("upgrade", "--pod-failure-grace", tc.grace, "--timeout", "90s")
					again.RequireCode(t, outcome.ExitFailure)
				})
			}
		})
	}
}

// With wait.podFailureGrace 0 (--pod-failure-grace 0) the pods are not
// watched: the wait runs to its timeout as before (exit 4).
func TestPodFailureGraceOff(t *testing.T) {
	env := testenv.ForTest(t)
	shared(t, env)
	ns := env.Namespace(t)
	chart, rel := name("p"), name("rel")
	writeCharts(t, chart, map[string]any{"podAnnotations": map[string]any{testenv.HoldAnnotation: testenv.HoldPull, kubelet.Mode: kubelet.ModeCrashLoop}})
	run, _ := releaseKind(t, env, chart, ns, rel)
	r := run("upgrade", "--pod-failure-grace", "0", "--timeout", "8s")
	r.RequireCode(t, outcome.ExitTimeout)
	assert.NotContains(t, r.Stderr, "cannot start")
}
