package plainrelease

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

func TestRecordLabelsRoundTrip(t *testing.T) {
	r := upgrade.Record{Version: "1.2.3+rke2r1", ValuesHash: strings.Repeat("ab", 32), AppliedAt: "2026-11-24T10:00:00Z",
		PreviousVersion: "1.2.2+rke2r2"}
	l := recordLabels(r, 7, 8)
	for k, v := range l {
		assert.Empty(t, validation.IsQualifiedName(k), k)
		assert.Empty(t, validation.IsValidLabelValue(v), "%s=%s", k, v)
	}
	assert.Equal(t, r, recordOf(l))
	assert.Equal(t, 7, fromRevision(l))
	assert.Equal(t, upgrade.Record{}, recordOf(nil))
	assert.Equal(t, 0, fromRevision(nil))
}
