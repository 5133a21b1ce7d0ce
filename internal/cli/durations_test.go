package cli_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
)

func TestDurationFlagsMustBePositive(t *testing.T) {
	for _, args := range [][]string{
		{"upgrade", "--target", "managedchart/a/b", "--chart-source", ".", "--timeout", "0s"},
		{"preflight", "--target", "managedchart/a/b", "--chart-source", ".", "--timeout", "-5m"},
		{"upgrade", "--target", "managedchart/a/b", "--chart-source", ".", "--lease-duration", "0s"},
		{"upgrade", "--target", "managedchart/a/b", "--chart-source", ".", "--hook-timeout", "-1s"},
		{"rollback", "--target", "managedchart/a/b", "--timeout", "0s"},
		{"plan", "--image", "x/y", "--version", "1", "--wait-timeout", "0s"},
		{"resolve", "--channel", "http://127.0.0.1:1/v1/channels/x", "--timeout", "0s"},
		{"node", "drain", "--node", "n", "--timeout", "-1m"},
	} {
		code, stdout, stderr := noderun.CLI(t, args...).Outputs()
		assert.Equal(t, 2, code, "%v: %s", args, stderr)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "must be a positive duration", args)
	}
}
