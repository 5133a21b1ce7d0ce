package channel

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// transient marks an error worth another attempt: a network error, a 5xx
// answer, no answer in time.
type transient struct{ err error }

func (t *transient) Error() string { return t.err.Error() }
func (t *transient) Unwrap() error { return t.err }

func retryable(err error) error { return &transient{err: err} }

// isTransient tells whether err is marked worth another attempt.
func isTransient(err error) bool {
	var t *transient
	return errors.As(err, &t)
}

// retry calls try until it succeeds or fails with an error not marked
// transient, at most o.Attempts times within o.Timeout, each call bounded by
// o.AttemptTimeout, waiting o.Backoff (doubled each time) between calls.
// An error not marked transient is returned as it is; the last transient one,
// and running out of time, are prefixed with what. The end of the caller's context is reported
// with its cause; running out of attempts or of o.Timeout is a plain failure
// (exit 1), never a timed-out outcome.
func retry(ctx context.Context, o Options, what string, try func(context.Context) error) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	wait := o.Backoff
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, o.AttemptTimeout)
		err := try(actx)
		attemptExpired := errors.Is(actx.Err(), context.DeadlineExceeded)
		acancel()
		if err == nil || !isTransient(err) {
			return err
		}
		switch {
		case parent.Err() != nil:
			return prefix(what, context.Cause(parent))
		case ctx.Err() != nil:
			return prefix(what, fmt.Errorf("no version within %s (%d attempts; last: %v)", o.Timeout, attempt, err))
		case attemptExpired:
			err = retryable(fmt.Errorf("no answer within %s", o.AttemptTimeout))
		}
		if attempt >= o.Attempts {
			return prefix(what, fmt.Errorf("%w (gave up after %d attempts)", err, attempt))
		}
		o.Log.Warn("retrying", "what", what, "attempt", attempt, "of", o.Attempts, "in", wait, "error", err)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			if parent.Err() != nil {
				return prefix(what, context.Cause(parent))
			}
			return prefix(what, fmt.Errorf("no version within %s (%d attempts; last: %v)", o.Timeout, attempt, err))
		}
		wait *= 2
	}
}

// prefix names what an error is about; nil stays nil.
func prefix(what string, err error) error {
	if err == nil || what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}
