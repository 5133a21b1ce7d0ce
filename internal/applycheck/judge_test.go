package applycheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// A server-side apply refuses another manager's field (then the ways
// out), forces it as a warning, and passes over the applier's own
// entries; a client-side one warns only where the chart changes the field.
func TestJudge(t *testing.T) {
	hotfix := Conflict{Object: "Deployment ns/web", Field: ".spec.x", Owner: `"kubectl-set" using apps/v1`, OwnerName: "kubectl-set",
		Live: "hot", New: "new", AppliedAs: "helm"}
	kept := hotfix
	kept.Field, kept.Unchanged = ".spec.y", true
	own := Conflict{Object: "Deployment ns/web", Field: ".spec.z", Owner: `"helm" using apps/v1`, OwnerName: "helm", AppliedAs: "helm"}
	res := Result{Conflicts: []Conflict{hotfix, kept, own}}

	refused, warnings := Judge(res, How{ServerSide: true, Applier: "Helm applies this release", Self: "helm"})
	assert.Equal(t, []string{
		`field-manager conflict: Deployment ns/web .spec.x is owned by "kubectl-set" using apps/v1 (live: hot; the upgrade sets: new); Helm applies this release server-side as "helm" and would fail`,
		`field-manager conflict: Deployment ns/web .spec.y is owned by "kubectl-set" using apps/v1 (live: hot; the upgrade sets: new); Helm applies this release server-side as "helm" and would fail`,
		WaysOut,
	}, refused)
	assert.Empty(t, warnings)

	refused, warnings = Judge(res, How{ServerSide: true, Force: true, Applier: "Helm applies this release", Self: "helm"})
	assert.Empty(t, refused)
	if assert.Len(t, warnings, 2) {
		assert.Equal(t, values.WarnFieldOwner, warnings[0].Kind)
		assert.Equal(t, "Deployment ns/web .spec.x", warnings[0].Path)
		assert.Contains(t, warnings[0].Message, "the upgrade takes the field")
	}

	refused, warnings = Judge(res, How{Applier: "Helm applies this release", Self: "helm"})
	assert.Empty(t, refused)
	if assert.Len(t, warnings, 1, "the field the chart does not change is left alone") {
		assert.Contains(t, warnings[0].Message, "Helm applies this release client-side and overwrites it")
	}
}
