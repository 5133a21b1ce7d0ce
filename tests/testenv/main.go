package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
)

// The control plane a test package shares, started on first use.
var shared struct {
	sync.Mutex
	enabled bool
	opts    Options
	env     *Env
	err     error
}

// Main runs the tests of a package that shares one control plane (see
// Shared) and exits: call it from TestMain. It stops the control plane after
// the tests, and on SIGINT/SIGTERM, so no process outlives the test binary.
func Main(m *testing.M, opts Options) {
	shared.Lock()
	shared.enabled, shared.opts = true, opts
	shared.Unlock()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		stopShared()
		os.Exit(130)
	}()

	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Shared returns the package's shared control plane, starting it on the
// first call. It fails unless TestMain calls Main, which stops it. A failed
// start is not retried.
func Shared(ctx context.Context) (*Env, error) {
	shared.Lock()
	defer shared.Unlock()
	if !shared.enabled {
		return nil, errors.New("using the shared test environment: TestMain must call testenv.Main")
	}
	if shared.env == nil && shared.err == nil {
		shared.env, shared.err = Start(ctx, shared.opts)
	}
	return shared.env, shared.err
}

func stopShared() error {
	shared.Lock()
	defer shared.Unlock()
	if shared.env == nil {
		return nil
	}
	return shared.env.Stop()
}

// TB is the part of testing.TB the helpers need.
type TB interface {
	Helper()
	Name() string
	Fatalf(format string, args ...any)
	Context() context.Context
}

// ForTest returns the shared control plane, failing the test if it cannot
// start.
func ForTest(t TB) *Env {
	t.Helper()
	env, err := Shared(t.Context())
	if err != nil {
		t.Fatalf("test environment: %v", err)
	}
	return env
}

// Namespace creates a fresh namespace named after the test.
func (e *Env) Namespace(t TB) string {
	t.Helper()
	ns, err := e.CreateNamespace(t.Context(), t.Name())
	if err != nil {
		t.Fatalf("%v", err)
	}
	return ns
}
