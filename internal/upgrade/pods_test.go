package upgrade

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePods shows failing containers, changed by set.
type fakePods struct {
	mu      sync.Mutex
	failing []PodFailure
	changed chan struct{}
	podless bool
}

func (p *fakePods) Podless() bool { return p.podless }

func (p *fakePods) Failing() []PodFailure {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PodFailure(nil), p.failing...)
}
func (p *fakePods) Changed() <-chan struct{} { return p.changed }
func (p *fakePods) set(fs ...PodFailure) {
	p.mu.Lock()
	p.failing = fs
	p.mu.Unlock()
	p.changed <- struct{}{}
}

var pullBackOff = PodFailure{Pod: "apps/web-1", Workload: "Deployment apps/web", Container: "container web", Image: "r.example.com/web:9",
	Reason: "ImagePullBackOff", Message: `Back-off pulling image "r.example.com/web:9"`}

// A container that cannot start for the whole grace ends the wait with
// ErrPodFailed, naming it; the progress shows it from the first look.
func TestWaitReadyPodFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	pods := &fakePods{changed: make(chan struct{}), failing: []PodFailure{pullBackOff}}
	var first string
	r, err := WaitReady(ctx, staticWatch{Readiness{Waiting: []string{"1 of 2 updated"}}}, Want{Version: "2.0.0"},
		WaitOptions{Pods: pods, PodFailureGrace: 20 * time.Millisecond, Progress: func(r Readiness) {
			if first == "" {
				first = r.Progress()
			}
		}})
	require.ErrorIs(t, err, ErrPodFailed)
	require.NotNil(t, r.PodFailed)
	assert.Equal(t, pullBackOff, *r.PodFailed)
	assert.Contains(t, first, "cannot start: pod apps/web-1 container web: ImagePullBackOff")
	assert.Equal(t, `pod apps/web-1 (Deployment apps/web), container web, image r.example.com/web:9: ImagePullBackOff: Back-off pulling image "r.example.com/web:9"`,
		r.PodFailed.String())
}

// A container that recovers within the grace does not end the wait; one
// that fails again starts its grace again.
func TestWaitReadyPodRecovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	pods := &fakePods{changed: make(chan struct{}), failing: []PodFailure{pullBackOff}}
	w := &seqWatch{changed: make(chan struct{}), rs: []Readiness{{Waiting: []string{"rolling"}}, {Ready: true}}}
	done := make(chan error, 1)
	go func() {
		_, err := WaitReady(ctx, w, Want{Version: "2.0.0"}, WaitOptions{Pods: pods, PodFailureGrace: time.Hour})
		done <- err
	}()
	pods.set() // it pulled after all
	w.advance()
	require.NoError(t, <-done)
}

// With a grace of 0 a failing container is shown but never ends the wait.
func TestWaitReadyPodFailureOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	pods := &fakePods{changed: make(chan struct{}), failing: []PodFailure{pullBackOff}}
	r, err := WaitReady(ctx, staticWatch{Readiness{Waiting: []string{"rolling"}}}, Want{Version: "2.0.0"}, WaitOptions{Pods: pods})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Len(t, r.Failing, 1)
	assert.Nil(t, r.PodFailed)
}

// A crash loop's line names the last exit code and message.
func TestPodFailureString(t *testing.T) {
	code := int32(2)
	f := PodFailure{Pod: "apps/web-1", Workload: "Deployment apps/web", Container: "container web", Image: "r/web:2", Reason: "CrashLoopBackOff",
		Message: "back-off 20s restarting failed container=web", Restarts: 3, LastExit: &code, LastMessage: "panic: bad config"}
	assert.Equal(t, "pod apps/web-1 (Deployment apps/web), container web, image r/web:2: CrashLoopBackOff: back-off 20s restarting failed container=web; "+
		"last exit code 2 after 3 restarts: panic: bad config", f.String())
}

// kubeletStep is one status write of a crash-looping container as a real
// kubelet makes them, at a second of a test's clock: the restart count is
// the CRI's attempt of the newest container, so it rises when the next
// container runs, not at the crash (pkg/kubelet convertToAPIContainerStatuses).
type kubeletStep struct {
	at int // seconds
	f  *PodFailure
}

func crashStatus(state string, restarts int32) *PodFailure {
	code := int32(2)
	f := PodFailure{Pod: "apps/web-1", Workload: "Deployment apps/web", Container: "container web", Image: "r/web:2",
		Restarts: restarts, LastExit: &code, LastMessage: "panic: bad config", Crashed: true}
	switch state {
	case "terminated":
		f.Reason, f.Message = "Error", "exited with code 2"
	case "backoff":
		f.Reason, f.Message = "CrashLoopBackOff", "back-off 8s restarting failed container=web"
	case "running":
		f.Reason, f.Message, f.Running = "Restarted", "running again after exit code 2", true
	}
	return &f
}

// play judges each step on a clock that stands at its second, and says at
// which second the clock gave up on the container (-1: never).
func play(t *testing.T, grace time.Duration, steps []kubeletStep, until int) (int, *podClock) {
	t.Helper()
	pods := &fakePods{changed: make(chan struct{}, 100)}
	clock := newPodClock(pods, grace)
	var now time.Time
	clock.now = func() time.Time { return now }
	start := time.Unix(1_000_000, 0)
	i := 0
	for sec := 0; sec <= until; sec++ {
		for i < len(steps) && steps[i].at == sec {
			pods.mu.Lock()
			pods.failing = nil
			if steps[i].f != nil {
				pods.failing = []PodFailure{*steps[i].f}
			}
			pods.mu.Unlock()
			i++
		}
		now = start.Add(time.Duration(sec) * time.Second)
		var r Readiness
		if clock.judge(&r) {
			return sec, clock
		}
	}
	return -1, clock
}

// The kubelet's sequence of a crash loop whose back-off is capped below
// the grace (KEP-4603): running and Ready (no readiness probe),
// terminated, back-off, running … Each write shows another state, and
// none lasts the grace; the container is failing all the same, and the
// clock gives up on it at the grace.
func TestPodClockCrashLoopAsTheKubeletShowsIt(t *testing.T) {
	var steps []kubeletStep
	for n, at := int32(0), 0; at < 60; n, at = n+1, at+10 {
		steps = append(steps,
			kubeletStep{at, crashStatus("terminated", n)},
			kubeletStep{at + 1, crashStatus("backoff", n)},
			kubeletStep{at + 9, crashStatus("running", n+1)})
	}
	gaveUp, _ := play(t, 15*time.Second, steps, 60)
	assert.Equal(t, 15, gaveUp, "failing since its first crash, at 0 s, for the 15 s grace")
}

// A container that crashed once at start and then runs is not failing:
// the clock lets it go once its crash is a grace old.
func TestPodClockOneCrashThenRuns(t *testing.T) {
	steps := []kubeletStep{{0, crashStatus("terminated", 0)}, {1, crashStatus("backoff", 0)}, {10, crashStatus("running", 1)}}
	gaveUp, clock := play(t, 15*time.Second, steps, 60)
	assert.Equal(t, -1, gaveUp)
	var r Readiness
	clock.judge(&r)
	assert.Empty(t, r.Failing, "a crash a grace old is no failure")
	assert.Empty(t, clock.since)
}

// A container first seen running after crashes before the wait began is
// not failing until it crashes again.
func TestPodClockRunningAfterOldCrashes(t *testing.T) {
	steps := []kubeletStep{{0, crashStatus("running", 5)}, {20, crashStatus("terminated", 5)}, {21, crashStatus("backoff", 5)},
		{29, crashStatus("running", 6)}, {31, crashStatus("terminated", 6)}, {32, crashStatus("backoff", 6)}, {40, crashStatus("running", 7)}}
	gaveUp, _ := play(t, 15*time.Second, steps, 60)
	assert.Equal(t, 35, gaveUp, "from its crash at 20 s")
}

// With wait.settle, a target that is ready while a container crashes
// (Ready between two crashes: no readiness probe) fails the wait; one
// that stays ready for the settle succeeds.
func TestWaitReadySettle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	pods := &fakePods{changed: make(chan struct{}, 10)}
	done := make(chan struct{})
	var r Readiness
	var err error
	go func() {
		defer close(done)
		r, err = WaitReady(ctx, staticWatch{Readiness{Ready: true}}, Want{Version: "2.0.0"},
			WaitOptions{Pods: pods, PodFailureGrace: time.Hour, Settle: time.Hour})
	}()
	pods.set(*crashStatus("terminated", 0))
	<-done
	require.ErrorIs(t, err, ErrPodFailed)
	assert.True(t, r.Settling)
	require.NotNil(t, r.PodFailed)
	assert.Equal(t, "Error", r.PodFailed.Reason)

	quiet := &fakePods{changed: make(chan struct{})}
	r, err = WaitReady(ctx, staticWatch{Readiness{Ready: true}}, Want{Version: "2.0.0"},
		WaitOptions{Pods: quiet, PodFailureGrace: time.Hour, Settle: 10 * time.Millisecond})
	require.NoError(t, err)
	assert.True(t, r.Ready)
}

// A wait whose timeout ends while the target is ready and settling, with
// no crash seen, is done: the settle is cut short, not failed.
func TestWaitReadySettleCutShortByTheTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	quiet := &fakePods{changed: make(chan struct{})}
	r, err := WaitReady(ctx, staticWatch{Readiness{Ready: true}}, Want{Version: "2.0.0"},
		WaitOptions{Pods: quiet, PodFailureGrace: time.Hour, Settle: time.Hour})
	require.NoError(t, err)
	assert.True(t, r.Ready)
}

// A revision that makes no pod has nothing to settle: the wait ends at
// readiness, the settle not waited (an hour here, and the test bound is
// 10 s).
func TestWaitReadyPodlessDoesNotSettle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	podless := &fakePods{changed: make(chan struct{}), podless: true}
	r, err := WaitReady(ctx, staticWatch{Readiness{Ready: true}}, Want{Version: "2.0.0"},
		WaitOptions{Pods: podless, PodFailureGrace: time.Hour, Settle: time.Hour})
	require.NoError(t, err)
	assert.True(t, r.Ready)
	assert.NoError(t, ctx.Err(), "ended at readiness, not at the bound")
}

// podsPort counts its watches and keeps their contexts.
type podsPort struct {
	mu       sync.Mutex
	versions []string
	ctxs     []context.Context
}

func (p *podsPort) Watch(ctx context.Context, _ *Observed, want Want) (PodWatch, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.versions = append(p.versions, want.Version)
	p.ctxs = append(p.ctxs, ctx)
	return &fakePods{changed: make(chan struct{})}, nil
}

// The apply and the wait of one upgrade share one watch of the new
// revision's pods (its informers list once), which the run stops at its
// end; a retried Job's wait, with no apply before it, starts its own.
func TestRunWatchesThePodsOnce(t *testing.T) {
	e := newEnv(t)
	port := &podsPort{}
	e.job.Pods, e.job.PodFailureGrace = port, time.Hour
	e.mustRun(GoalUpgrade)
	require.Equal(t, []string{"2.0.0"}, port.versions, "one watch for the apply and the wait")
	assert.Error(t, port.ctxs[0].Err(), "the watch ends with the run")

	// the target applied and not yet ready, as a Job killed in its wait
	// leaves it: the next run waits without applying
	e.target.setReady(false)
	again := e.again()
	again.job.Pods = port
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = again.run(GoalUpgrade)
	}()
	require.Eventually(t, func() bool {
		port.mu.Lock()
		defer port.mu.Unlock()
		return len(port.versions) == 2
	}, testBound, time.Millisecond, "the wait starts a watch of its own")
	e.target.setReady(true)
	<-done
	assert.Equal(t, 1, e.target.applyCalls, "no second apply")
}
