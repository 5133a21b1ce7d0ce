package outcome

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each sentinel, however wrapped, gives its exit code and is classified;
// a library's error is exit 1 (a deadline exit 4) and is not.
func TestCodeAndClassified(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		code       int
		classified bool
	}{
		{"nil", nil, ExitOK, false},
		{"bad input", BadInput(errors.New("--target: empty")), ExitBadInput, true},
		{"refused, wrapped", fmt.Errorf("preflight: %w", Refused(errors.New("conflict"))), ExitRefused, true},
		{"timeout", Timeout(errors.New("not ready")), ExitTimeout, true},
		{"lock held", fmt.Errorf("%w: pid 7", ErrLockHeld), ExitLockHeld, true},
		{"a deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), ExitTimeout, false},
		{"a library's error", errors.New("connection refused"), ExitFailure, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.code, Code(tc.err))
			assert.Equal(t, tc.classified, Classified(tc.err))
		})
	}
	assert.Equal(t, "--target: empty", BadInput(errors.New("--target: empty")).Error(), "the message is the error's own")
}
