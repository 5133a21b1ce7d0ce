// Package outcome holds the sentinel errors callers branch on and maps them
// to the exit codes of docs/design.md §10, in one place.
package outcome

import (
	"context"
	"errors"
)

// The outcomes. Wrap them with %w; Code finds them anywhere in the chain.
var (
	// ErrBadInput: unreadable or invalid input, a bad flag (exit 2).
	ErrBadInput = errors.New("bad input")
	// ErrRefused: preflight or a policy refused the upgrade (exit 3).
	ErrRefused = errors.New("refused")
	// ErrTimeout: a wait ran out of time (exit 4).
	ErrTimeout = errors.New("timed out")
	// ErrLockHeld: another process holds the lock (exit 5).
	ErrLockHeld = errors.New("lock held")
)

// sentinels are the errors above, each with an exit code of its own.
var sentinels = []error{ErrBadInput, ErrRefused, ErrTimeout, ErrLockHeld}

// Classified reports whether err carries one of the sentinel errors
// (an error of the program's own, with its exit code), not a library's.
func Classified(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// Exit codes of docs/design.md §10.
const (
	ExitOK       = 0
	ExitFailure  = 1
	ExitBadInput = 2
	ExitRefused  = 3
	ExitTimeout  = 4
	ExitLockHeld = 5
)

// Code returns the exit code for err: 0 for nil, 1 for anything unclassified.
func Code(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrBadInput):
		return ExitBadInput
	case errors.Is(err, ErrRefused):
		return ExitRefused
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	case errors.Is(err, ErrLockHeld):
		return ExitLockHeld
	default:
		return ExitFailure
	}
}

// BadInput marks err as bad input (exit 2), keeping its message.
func BadInput(err error) error { return mark(err, ErrBadInput) }

// Refused marks err as a refusal (exit 3), keeping its message.
func Refused(err error) error { return mark(err, ErrRefused) }

// Timeout marks err as a timeout (exit 4), keeping its message.
func Timeout(err error) error { return mark(err, ErrTimeout) }

func mark(err, kind error) error {
	if err == nil || errors.Is(err, kind) {
		return err
	}
	return &marked{err: err, kind: kind}
}

type marked struct{ err, kind error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.kind} }

// Meaning names an exit code in words, as docs/design.md §10 does.
func Meaning(code int) string {
	switch code {
	case ExitOK:
		return "done"
	case ExitBadInput:
		return "bad input"
	case ExitRefused:
		return "refused"
	case ExitTimeout:
		return "timed out"
	case ExitLockHeld:
		return "lock held"
	default:
		return "failed"
	}
}
