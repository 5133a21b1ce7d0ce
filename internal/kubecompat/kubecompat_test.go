package kubecompat

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// The module named in the reports is the one go.mod builds with.
func TestAPIModuleIsGoMods(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	want := regexp.MustCompile(`(?m)^\s*k8s\.io/api => (k8s\.io/api v\S+)$`).FindSubmatch(data)
	require.NotNil(t, want, "go.mod replaces k8s.io/api")
	assert.Equal(t, string(want[1]), apiModule)
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"1.34": "v1.34.0", "v1.34.2": "v1.34.2", "v1.34.2+k3s1": "v1.34.2", "v1.33.5+rke2r1": "v1.33.5"} {
		v, err := ParseVersion(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, v.String(), in)
	}
	for _, bad := range []string{"", "next", "2.0", "v1.34.0-rc.1", "1.34+foo"} {
		_, err := ParseVersion(bad)
		assert.ErrorIs(t, err, outcome.ErrBadInput, bad)
	}
}

// Removal is Kubernetes' own data: policy/v1beta1 PodDisruptionBudget
// went in 1.25, batch/v1 CronJob stays, a CRD's kind is not judged.
func TestRemovedAt(t *testing.T) {
	v := func(s string) Version { x, err := ParseVersion(s); require.NoError(t, err); return x }
	at, ok := removedAt(schema.GroupVersionKind{Group: "policy", Version: "v1beta1", Kind: "PodDisruptionBudget"}, v("1.25"))
	assert.True(t, ok)
	assert.Equal(t, "1.25", at)
	_, ok = removedAt(schema.GroupVersionKind{Group: "policy", Version: "v1beta1", Kind: "PodDisruptionBudget"}, v("1.24"))
	assert.False(t, ok)
	_, ok = removedAt(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, v("1.40"))
	assert.False(t, ok)
	_, ok = removedAt(schema.GroupVersionKind{Group: "example.com", Version: "v1beta1", Kind: "Widget"}, v("1.40"))
	assert.False(t, ok)
}
