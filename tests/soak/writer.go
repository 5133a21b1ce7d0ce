package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
)

// writerHook is installed as pre-preflight, pre-merge and pre-apply in the
// hooks directory the upgrades get. When the cycle armed the concurrent
// writer for this phase, the first process to get there asks the soak to
// write now and waits (at most 10 s) until it has: the write lands after
// the process read the target and before it applies, which is the window
// the tool must notice (it re-reads before its write, and its write is
// conditional on the resourceVersion it read).
const writerHook = `#!/bin/sh
# chart-upgrader soak: the moment of the concurrent writer (tests/soak/writer.go)
[ -n "$SOAK_WRITER_DIR" ] || exit 0
[ "$CHART_UPGRADER_HOOK_PHASE" = "$SOAK_WRITER_AT" ] || exit 0
mkdir "$SOAK_WRITER_DIR/request" 2>/dev/null || exit 0
i=0
while [ ! -e "$SOAK_WRITER_DIR/done" ] && [ "$i" -lt 200 ]; do
  sleep 0.05
  i=$((i + 1))
done
exit 0
`

// writerPhases are the hook points the writer may be armed at.
var writerPhases = []string{"preflight", "merge", "apply"}

func installHooks(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, ph := range writerPhases {
		if err := os.WriteFile(filepath.Join(dir, "pre-"+ph), []byte(writerHook), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// writer is the concurrent writer of one upgrade cycle: another party that
// changes an unrelated value in spec.values (a JSON merge patch) while the
// upgrade runs, but never after the upgrade's apply (a change after it is
// a new change of the values, which the tool's wait rightly does not take
// for its own apply).
type writer struct {
	w        *world
	dir      string
	at       string // the hook phase
	to       string // the cycle's version: the apply is seen when the annotations say it
	key, val string

	mu      sync.Mutex
	written time.Time // when the write was accepted; zero when it did not write
	skipped string    // why it did not write
	stop    chan struct{}
	done    chan struct{}
}

func (s *soak) startWriter(ctx context.Context, cycleDir string, n int, at, to string) (*writer, error) {
	wr := &writer{w: s.w, dir: filepath.Join(cycleDir, "writer"), at: at, to: to,
		key: fmt.Sprintf("cycle%d", n), val: fmt.Sprintf("written by the soak's writer before the apply of cycle %d (seed %d)", n, s.seed),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := os.MkdirAll(wr.dir, 0o755); err != nil {
		return nil, err
	}
	go wr.run(ctx)
	return wr, nil
}

// env is what the processes of the cycle get: the hook acts on it.
func (wr *writer) env() []string {
	return []string{"SOAK_WRITER_DIR=" + wr.dir, "SOAK_WRITER_AT=" + wr.at}
}

func (wr *writer) run(ctx context.Context) {
	defer close(wr.done)
	for {
		if _, err := os.Stat(filepath.Join(wr.dir, "request")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			wr.skip("the cycle ended before a process reached pre-" + wr.at)
			return
		case <-wr.stop:
			wr.skip("no process reached pre-" + wr.at)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	wr.write(ctx)
	_ = os.WriteFile(filepath.Join(wr.dir, "done"), nil, 0o644)
}

// write patches the value in, conditional on the resourceVersion of a read
// that found the target not yet applied.
func (wr *writer) write(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		mc, err := wr.w.get(wctx)
		if err != nil {
			wr.skip("reading the target: " + err.Error())
			return
		}
		if mc.Version == wr.to && mc.Annotations[managedchart.AnnotationVersion] == wr.to {
			wr.skip("the target was already applied")
			return
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": mc.ResourceVersion},
			"spec":     map[string]any{"values": map[string]any{"soak": map[string]any{"writer": map[string]any{wr.key: wr.val}}}},
		})
		err = wr.w.patch(wctx, patch)
		if err == nil {
			wr.mu.Lock()
			wr.written = time.Now()
			wr.mu.Unlock()
			return
		}
		if !apierrors.IsConflict(err) {
			select {
			case <-wctx.Done():
				wr.skip("writing: " + err.Error())
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func (wr *writer) skip(why string) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.skipped = why
}

// finish stops the writer and reports when it wrote (zero: it did not, and
// why).
func (wr *writer) finish() (time.Time, string) {
	select {
	case <-wr.done:
	default:
		close(wr.stop)
		<-wr.done
	}
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.written, wr.skipped
}
