package e2erollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	probe bool     // the container has a readiness probe
	flags []string // --pod-failure-grace and --settle
	says  []string
}

var podCases = []podCase{
	{"a pull that fails on the node's disk", kubelet.ModeDiskFull, false, []string{"--pod-failure-grace", "3s"},
		[]string{"cannot start version 2.0.0: pod ", "container web, image " /* the image follows */, "no space left on device", "for 3s (wait.podFailureGrace)"}},
	// running (not ready), terminated, back-off capped at 1 s, running …:
	// no state lasts the grace, the crash loop does
	{"a crash loop as a kubelet shows it, its back-off capped below the grace", kubelet.ModeCrashLoop, true, []string{"--pod-failure-grace", "3s", "--settle", "0"},
		[]string{"cannot start version 2.0.0: pod ", "container web", "last exit code 2 after ", "panic: invalid configuration: listen.port must be a number", "for 3s (wait.podFailureGrace)"}},
	// no readiness probe: Ready while it runs, so the rollout is
	// available between two crashes; wait.settle sees the next crash (in
	// whichever of the kubelet's writes it is seen first: terminated,
	// backing off or running again, each names the last exit)
	{"a crash loop Ready between crashes, under wait.settle", kubelet.ModeCrashLoop, false, []string{"--pod-failure-grace", "5m", "--settle", "30s"},
		[]string{"was ready at version 2.0.0, but a container crashed within 30s (wait.settle): pod ", "container web", "last exit code 2 after "}},
	{"a ConfigMap key missing", kubelet.ModeConfigError, false, []string{"--pod-failure-grace", "3s"},
		[]string{"container web", ": CreateContainerConfigError: couldn't find key missing-key in ConfigMap "}},
	{"ImagePullBackOff for less than the grace, then it runs", kubelet.ModeBriefBackOff, false, []string{"--pod-failure-grace", "10s"}, nil},
}

// An upgrade whose new pods cannot start ends its wait at once, exit 1,
// naming the pod, container, image, reason and the kubelet's message, as
// each kind's Plan ServiceAccount (the list and watch of the pods, the
// workloads and ReplicaSets, derived by plan --check-chart); the release is
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
					writeCharts(t, chart, map[string]any{"replicas": 1, "readinessProbe": tc.probe,
						"podAnnotations": map[string]any{testenv.HoldAnnotation: testenv.HoldPull, kubelet.Mode: tc.mode}})
					run, _ := k.run(t, env, chart, ns, rel)
					start := time.Now()
					r := run("upgrade", append([]string{"--timeout", "90s"}, tc.flags...)...)
					took := time.Since(start)
					t.Logf("exit %d after %s", r.Code, took.Round(10*time.Millisecond))
					if tc.says == nil {
						r.RequireCode(t, 0)
						return
					}
					if r.Code != outcome.ExitFailure {
						t.Log(r.Stderr)
					}
					r.RequireCode(t, outcome.ExitFailure)
					for _, s := range tc.says {
						assert.Contains(t, r.Stderr, s)
					}
					assert.Contains(t, r.Stderr, images.origin.Host+"/app:1.0.0", "the image is named")
					assert.Less(t, took, 60*time.Second, "the wait ends within the grace plus the rollout, not at its timeout: %s", took)
					assert.Contains(t, r.Stderr, `"progress":"ready `, "the progress line")
					if !slices.Contains(tc.flags, "--settle") || tc.probe {
						assert.True(t, strings.Contains(r.Stderr, "cannot start: pod "), "the progress line shows the failing pod")
					}
					if k.name == "release" {
						assert.Contains(t, r.Stderr, "rolled back", "a release rolls back as after a stall")
					}
					if k.name == "managedchart" && slices.Contains(tc.flags, "--settle") && !tc.probe {
						// nothing undoes a ManagedChart's apply: a re-run finds it at
						// the version and, between two crashes, ready (docs/reference.md)
						return
					}
					if k.name == "release" {
						// the rolled-back revision's pods settle first (its
						// old pod terminating is a release not healthy:
						// preflight refuses an upgrade from it, exit 3)
						waitSettled(t, env, ns)
					}
					again := run("upgrade", append([]string{"--timeout", "90s"}, tc.flags...)...)
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
	writeCharts(t, chart, map[string]any{"readinessProbe": true,
		"podAnnotations": map[string]any{testenv.HoldAnnotation: testenv.HoldPull, kubelet.Mode: kubelet.ModeCrashLoop}})
	run, _ := releaseKind(t, env, chart, ns, rel)
	r := run("upgrade", "--pod-failure-grace", "0", "--timeout", "8s")
	r.RequireCode(t, outcome.ExitTimeout)
	assert.NotContains(t, r.Stderr, "cannot start")
}

// A pre-upgrade hook whose pod cannot start on the node (its pull fails
// on the node's disk) stops the apply within the grace, exit 1, naming the
// hook's pod, image and the kubelet's reason: Helm waits for its hooks
// inside the apply, so the pods are watched from the apply's start, not
// from the wait's. Before, the apply ran to Helm's hook timeout and said
// only "pre-upgrade hooks failed … context deadline exceeded" (exit 4).
func TestAHookPodThatCannotStartEndsTheApply(t *testing.T) {
	env := testenv.ForTest(t)
	shared(t, env)
	ns := env.Namespace(t)
	chart, rel := name("p"), name("rel")
	writeCharts(t, chart, map[string]any{"hookImage": images.origin.Host + "/app:2.0.0",
		"podAnnotations": map[string]any{testenv.HoldAnnotation: testenv.HoldPull, kubelet.Mode: kubelet.ModeDiskFull}})
	run, _ := releaseKind(t, env, chart, ns, rel)
	start := time.Now()
	r := run("upgrade", "--pod-failure-grace", "3s", "--timeout", "5m", "--skip-image-check")
	took := time.Since(start)
	r.RequireCode(t, outcome.ExitFailure)
	for _, s := range []string{"stopped applying version 2.0.0: pod " + ns + "/" + rel + "-migrate-", "(Job " + ns + "/" + rel + "-migrate)",
		"container migrate, image " + images.origin.Host + "/app:2.0.0", "no space left on device", "for 3s (wait.podFailureGrace)"} {
		assert.Contains(t, r.Stderr, s)
	}
	assert.NotContains(t, r.Stderr, "context deadline exceeded")
	t.Logf("the hook's failure ended the upgrade after %s", took)
}

// waitSettled waits until every Deployment of ns has no pod pending
// termination and its controller has observed its generation.
func waitSettled(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := env.Kube().AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, d := range l.Items {
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if d.Status.ObservedGeneration < d.Generation || d.Status.Replicas != want {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond, "the Deployments of %s settle", ns)
}
