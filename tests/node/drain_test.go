package nodes

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/node"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// mixedPods puts one pod of each kind on the fixture's node.
type mixedPods struct {
	web, api, agent, scratch, bare *corev1.Pod
}

func (f *fixture) mixedPods() mixedPods {
	return mixedPods{
		web:     f.pod(podSpec{name: "web", owner: "rs", labels: map[string]string{"app": "web"}}),
		api:     f.pod(podSpec{name: "api", owner: "rs", labels: map[string]string{"app": "api"}}),
		agent:   f.pod(podSpec{name: "agent", owner: "ds", labels: map[string]string{"app": "agent"}}),
		scratch: f.pod(podSpec{name: "scratch", owner: "rs", emptyDir: true, labels: map[string]string{"app": "scratch"}}),
		bare:    f.pod(podSpec{name: "bare", labels: map[string]string{"app": "bare"}}),
	}
}

// TestDrainRefusesWithoutFlags: DaemonSet pods, emptyDir pods and bare
// pods each need their flag; without them the drain refuses (exit 3),
// naming the pods, and evicts nothing. The node stays cordoned by us.
func TestDrainRefusesWithoutFlags(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.mixedPods()

	// the preflight refuses before the cordon: the node stays schedulable
	var out buffer
	err := node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 30 * time.Second, GracePeriodSeconds: grace(0), Out: &out})
	require.Error(t, err)
	assert.True(t, errors.Is(err, outcome.ErrRefused), "%v", err)
	msg := err.Error()
	assert.Contains(t, msg, `the drain of node "`+f.node+`" would not finish: 3 blocker(s): `)
	assert.Contains(t, msg, "pod "+f.ns+"/agent: kubectl drain cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)")
	assert.Contains(t, msg, "pod "+f.ns+"/scratch: kubectl drain cannot delete Pods with local storage (use --delete-emptydir-data to override)")
	assert.Contains(t, msg, "pod "+f.ns+"/bare: kubectl drain cannot delete Pods that declare no controller (use --force to override)")
	assert.Contains(t, out.String(), "BLOCKERS:")
	f.requireThere(p.web, p.api, p.agent, p.scratch, p.bare)
	f.requireSchedulable(f.node)

	t.Run("without the preflight, the drain cordons, then refuses", func(t *testing.T) {
		err := node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 30 * time.Second, GracePeriodSeconds: grace(0), SkipPreflight: true})
		require.Error(t, err)
		assert.True(t, errors.Is(err, outcome.ErrRefused), "%v", err)
		msg := err.Error()
		assert.Contains(t, msg, `draining node "`+f.node+`": `)
		assert.Contains(t, msg, "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): "+f.ns+"/agent")
		assert.Contains(t, msg, "cannot delete Pods with local storage (use --delete-emptydir-data to override): "+f.ns+"/scratch")
		assert.Contains(t, msg, "cannot delete Pods that declare no controller (use --force to override): "+f.ns+"/bare")
		f.requireThere(p.web, p.api, p.agent, p.scratch, p.bare)
		f.requireCordonedByUs(f.node)
	})

	t.Run("each flag lifts its refusal", func(t *testing.T) {
		err := node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 30 * time.Second, GracePeriodSeconds: grace(0),
			IgnoreDaemonSets: true, DeleteEmptyDirData: true})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "agent")
		assert.NotContains(t, err.Error(), "scratch")
		assert.Contains(t, err.Error(), f.ns+"/bare")
		f.requireThere(p.web, p.api, p.agent, p.scratch, p.bare)
	})
}

// TestDrainPodSelector: only the pods the selector matches are evicted;
// the others are not even considered (so they refuse nothing).
func TestDrainPodSelector(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.mixedPods()
	var out buffer

	require.NoError(t, node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 30 * time.Second,
		GracePeriodSeconds: grace(0), PodSelector: "app in (web, bare)", Force: true, Out: &out}))
	f.requireGone(p.web, p.bare)
	f.requireThere(p.api, p.agent, p.scratch)
	assert.Contains(t, out.String(), "node/"+f.node+" cordoned\n")
	assert.Contains(t, out.String(), "pod "+f.ns+"/web evicted\n")
	assert.Contains(t, out.String(), "node/"+f.node+": deleting Pods that declare no controller: "+f.ns+"/bare\n")
	assert.Contains(t, out.String(), "node/"+f.node+" drained\n")

	t.Run("a bad selector is bad input and cordons nothing", func(t *testing.T) {
		name := f.newNode(false)
		err := node.Drain(t.Context(), f.kube, name, node.DrainOptions{PodSelector: "app in (web"})
		require.Error(t, err)
		assert.Equal(t, outcome.ExitBadInput, outcome.Code(err), "%v", err)
		assert.Contains(t, err.Error(), `draining node "`+name+`": pod selector "app in (web": `)
		f.requireSchedulable(name)
	})
}

// TestDrainAll: with every flag, all pods but the DaemonSet's go; uncordon
// then undoes the drain's cordon.
func TestDrainAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.mixedPods()
	var out buffer

	require.NoError(t, node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 30 * time.Second,
		GracePeriodSeconds: grace(0), IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true, Out: &out}))
	f.requireGone(p.web, p.api, p.scratch, p.bare)
	f.requireThere(p.agent)
	f.requireCordonedByUs(f.node)
	assert.Contains(t, out.String(), "ignoring DaemonSet-managed Pods: "+f.ns+"/agent")

	// a second drain finds nothing to do
	out = buffer{}
	require.NoError(t, node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 30 * time.Second,
		GracePeriodSeconds: grace(0), IgnoreDaemonSets: true, Out: &out}))
	assert.Contains(t, out.String(), "the drain would finish (0 pods to evict")
	assert.NotContains(t, out.String(), "evicted")

	changed, err := node.Uncordon(t.Context(), f.kube, f.node, node.Options{})
	require.NoError(t, err)
	assert.True(t, changed)
	f.requireSchedulable(f.node)
}

// TestDrainRespectsPodDisruptionBudget: the drain's preflight refuses a
// pod whose PodDisruptionBudget allows no disruption before the cordon,
// asking no eviction. Without it, the eviction API refuses (429); the
// drain keeps asking until its timeout, then fails with exit 4 naming the
// pod, and asks no more. The other pods are evicted meanwhile. Once the
// budget is gone, the drain completes.
func TestDrainRespectsPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	web := f.pod(podSpec{name: "web-0", owner: "rs", labels: map[string]string{"app": "web"}})
	api := f.pod(podSpec{name: "api-0", owner: "rs", labels: map[string]string{"app": "api"}})
	f.pdb("web", map[string]string{"app": "web"})
	var out buffer
	ev, kube := f.evictionRecorder()

	err := node.Drain(t.Context(), kube, f.node, node.DrainOptions{Timeout: 2 * time.Second, GracePeriodSeconds: grace(0)})
	require.Error(t, err)
	assert.Equal(t, outcome.ExitRefused, outcome.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "budget: pod "+f.ns+"/web-0 (ReplicaSet/app): PodDisruptionBudget "+f.ns+"/web allows no disruption")
	assert.Empty(t, ev.answers("web-0"), "no eviction asked")
	assert.Empty(t, ev.answers("api-0"), "no eviction asked")
	f.requireSchedulable(f.node)
	f.requireThere(web, api)

	err = node.Drain(t.Context(), kube, f.node, node.DrainOptions{Timeout: 2 * time.Second, GracePeriodSeconds: grace(0), Out: &out, SkipPreflight: true})
	ev.drainReturned()
	require.Error(t, err)
	assert.True(t, errors.Is(err, outcome.ErrTimeout), "%v", err)
	assert.Equal(t, outcome.ExitTimeout, outcome.Code(err))
	assert.Equal(t, `draining node "`+f.node+`": timed out after 2s with 1 pod still there: `+
		f.ns+`/web-0 (PodDisruptionBudget `+f.ns+`/web allows no disruption)`, err.Error())
	assert.Contains(t, out.String(), "violate the pod's disruption budget")
	f.requireThere(web)
	f.requireGone(api)
	// what the drain asked and was answered: web-0 again and again, each
	// time refused by its budget, until the timeout ended the drain;
	// api-0 once, evicted
	webAnswers, apiAnswers := ev.answers("web-0"), ev.answers("api-0")
	t.Logf("evictions of web-0: %v, of api-0: %v", webAnswers, apiAnswers)
	assert.GreaterOrEqual(t, len(webAnswers), 2, "the drain asked again after the budget refused: %v", webAnswers)
	answered := webAnswers
	if n := len(answered); n > 2 && answered[n-1] == 0 {
		// the last request was in flight when the timeout ended the drain:
		// cancelled, never answered (seen once in CI: [429 … 429 0])
		answered = answered[:n-1]
	}
	for _, code := range answered {
		assert.Equal(t, http.StatusTooManyRequests, code, "every eviction of web-0 refused by its budget: %v", webAnswers)
	}
	assert.Equal(t, []int{http.StatusCreated}, apiAnswers, "api-0 evicted at the first request")

	require.NoError(t, f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}))
	require.NoError(t, node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 30 * time.Second, GracePeriodSeconds: grace(0)}))
	f.requireGone(web)
	assert.Empty(t, ev.afterReturn(), "the timed-out drain asked nothing once it had returned, not even after the budget was gone")
}

// TestDrainWaitsForTermination: without a grace period override, an
// evicted pod keeps its own (30 s); with no kubelet to finish it, it stays
// Terminating, and the drain times out naming it as such.
func TestDrainWaitsForTermination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	slow := f.pod(podSpec{name: "slow", owner: "rs"})
	quick := f.pod(podSpec{name: "quick", owner: "rs", grace: grace(0)})

	err := node.Drain(t.Context(), f.kube, f.node, node.DrainOptions{Timeout: 2 * time.Second})
	require.Error(t, err)
	assert.Equal(t, outcome.ExitTimeout, outcome.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "with 1 pod still there: "+f.ns+"/slow (terminating)")
	there, terminating := f.exists(slow)
	assert.True(t, there && terminating, "slow is terminating")
	f.requireGone(quick)
}

// evictions records the eviction requests made through one client, with
// the status the API server answered, and any request made after the
// drain using the client returned.
type evictions struct {
	next     http.RoundTripper
	mu       sync.Mutex
	byPod    map[string][]int
	returned bool
	late     []string
}

// evictionRecorder is a client of the fixture's API server whose requests
// go through a new recorder.
func (f *fixture) evictionRecorder() (*evictions, kubernetes.Interface) {
	f.t.Helper()
	ev := &evictions{byPod: map[string][]int{}}
	cfg := f.env.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { ev.next = rt; return ev })
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(f.t, err)
	return ev, kube
}

func (e *evictions) RoundTrip(r *http.Request) (*http.Response, error) {
	e.mu.Lock()
	if e.returned {
		e.late = append(e.late, r.Method+" "+r.URL.Path)
	}
	e.mu.Unlock()
	resp, err := e.next.RoundTrip(r)
	// POST /api/v1/namespaces/<ns>/pods/<pod>/eviction
	parts := strings.Split(r.URL.Path, "/")
	if r.Method == http.MethodPost && len(parts) >= 3 && parts[len(parts)-1] == "eviction" && parts[len(parts)-3] == "pods" {
		code := 0 // no answer
		if err == nil {
			code = resp.StatusCode
		}
		e.mu.Lock()
		pod := parts[len(parts)-2]
		e.byPod[pod] = append(e.byPod[pod], code)
		e.mu.Unlock()
	}
	return resp, err
}

// drainReturned marks the end of the drain: a request after it is late.
func (e *evictions) drainReturned() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.returned = true
}

// answers are the statuses of the evictions of pod, in order.
func (e *evictions) answers(pod string) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.byPod[pod]...)
}

// afterReturn are the requests made after drainReturned.
func (e *evictions) afterReturn() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.late...)
}
