package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
)

func outcomeCode(err error) int { return outcome.Code(err) }

// assertUnchanged: nobody wrote the spec or the annotations (the
// simulator's status writes change the resourceVersion, not these).
func assertUnchanged(t *testing.T, before, after *managedchart.ManagedChart) {
	t.Helper()
	assert.Equal(t, before.Generation, after.Generation, "spec changed")
	assert.Equal(t, before.Annotations, after.Annotations, "annotations changed")
	assert.Equal(t, before.Version, after.Version)
	assert.Equal(t, before.ValuesHash(), after.ValuesHash())
}
