package targets

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/internal/spec"
)

// TestSpecKnowsEveryKind: the spec parser accepts exactly the kinds the
// registry has an adapter for, so adding a kind is one adapter package,
// one registry line and its spelling in spec.Kinds — and this test fails
// until both are there.
func TestSpecKnowsEveryKind(t *testing.T) {
	var spelled []string
	for _, k := range spec.Kinds {
		spelled = append(spelled, strings.ToLower(k))
	}
	sort.Strings(spelled)
	assert.Equal(t, Kinds(), spelled)
	for name, k := range APIVersions() {
		assert.True(t, strings.EqualFold(k[1], name), "the object kind of %s is %s", name, k[1])
	}
}
