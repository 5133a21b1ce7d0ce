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
}

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
