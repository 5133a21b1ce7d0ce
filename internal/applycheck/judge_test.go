package applycheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

	refused, warnings := Judge(res, Applier{ServerSide: true, Name: "Helm applies this release", Manager: "helm"})
	assert.Equal(t, []string{
		`field-manager conflict: Deployment ns/web .spec.x is owned by "kubectl-set" using apps/v1 (live: hot; the upgrade sets: new); Helm applies this release server-side as "helm" and would fail`,
		`field-manager conflict: Deployment ns/web .spec.y is owned by "kubectl-set" using apps/v1 (live: hot; the upgrade sets: new); Helm applies this release server-side as "helm" and would fail`,
		WaysOut,
	}, refused)
	assert.Empty(t, warnings)

	refused, warnings = Judge(res, Applier{ServerSide: true, Force: true, Name: "Helm applies this release", Manager: "helm"})
	assert.Empty(t, refused)
	if assert.Len(t, warnings, 2) {
		assert.Equal(t, values.WarnFieldOwner, warnings[0].Kind)
		assert.Equal(t, "Deployment ns/web .spec.x", warnings[0].Path)
		assert.Contains(t, warnings[0].Message, "the upgrade takes the field")
	}

	refused, warnings = Judge(res, Applier{Name: "Helm applies this release", Manager: "helm"})
	assert.Empty(t, refused)
	if assert.Len(t, warnings, 1, "the field the chart does not change is left alone") {
		assert.Contains(t, warnings[0].Message, "Helm applies this release client-side and overwrites it")
	}
}

// An object the chart adds that exists without the release's ownership
// metadata is refused where the applier does not take ownership (with how
// to let it adopt the object), a warning where it does; an object not
// checked is a refusal naming why and the way out, a warning naming why
// where the spec says apply.unchecked: warn.
func TestJudgeOwnershipAndNotChecked(t *testing.T) {
	res := Result{
		Findings:   []Finding{Unowned{Object: "ConfigMap ns/extra", Why: `label "app.kubernetes.io/managed-by" missing: must be set to "Helm"`}},
		NotChecked: []string{"Widget ns/w: the cluster publishes no OpenAPI v3 schema for it"},
	}
	refused, warnings := Judge(res, Applier{ServerSide: true, Name: "Helm applies this release", Manager: "helm"})
	if assert.Len(t, refused, 2, "no WaysOut line without a field conflict") {
		assert.Contains(t, refused[0], "ownership conflict: ConfigMap ns/extra exists and cannot be imported into the release: invalid ownership metadata")
		assert.Contains(t, refused[0], "meta.helm.sh/release-name")
		assert.Equal(t, "not checked: Widget ns/w: the cluster publishes no OpenAPI v3 schema for it; "+UncheckedWayOut, refused[1])
	}
	assert.Empty(t, warnings)

	refused, warnings = Judge(res, Applier{ServerSide: true, Name: "Fleet's agent applies this chart", Manager: "fleetagent", TakesOwnership: true, WarnUnchecked: true})
	assert.Empty(t, refused)
	if assert.Len(t, warnings, 2) {
		assert.Equal(t, values.WarnTakeOwnership, warnings[0].Kind)
		assert.Contains(t, warnings[0].Message, "Fleet's agent applies this chart with takeOwnership and adopts it")
		assert.Equal(t, values.WarnNotChecked, warnings[1].Kind)
		assert.Equal(t, "Widget ns/w", warnings[1].Path)
		assert.Contains(t, warnings[1].Message, "no OpenAPI v3 schema")
	}
}

// An object the server would refuse is a refusal with the server's words
// and the way out that fits it.
func TestJudgeRejected(t *testing.T) {
	res := Result{Findings: []Finding{
		&Rejected{Object: "Deployment ns/web", Update: true, Immutable: true, Why: `Deployment.apps "web" is invalid: spec.selector: Invalid value: ...: field is immutable`},
		&Rejected{Object: "Widget ns/w", Update: true, CRD: "widgets.example.com", Why: ".spec.b: field not declared in schema"},
		&Rejected{Object: "Deployment ns/new", Why: "quantities must match the regular expression"},
	}}
	refused, warnings := Judge(res, Applier{ServerSide: true, Name: "Helm applies this release", Manager: "helm"})
	assert.Empty(t, warnings)
	require.Len(t, refused, 3)
	assert.Contains(t, refused[0], "rejected by the API server: Deployment ns/web: Deployment.apps \"web\" is invalid: spec.selector")
	assert.Contains(t, refused[0], "would fail updating it")
	assert.Contains(t, refused[0], "keep the live value (adopt the value that renders it), or delete the object first")
	assert.Contains(t, refused[1], "CustomResourceDefinition widgets.example.com does not declare it: upgrade the CRD first")
	assert.Contains(t, refused[2], "would fail creating it")
	assert.NotContains(t, refused[2], "ways out")
}

// A conflict read back in values terms says so at the end of its line,
// refused or warned.
func TestJudgeSaysWhichValueRendersTheField(t *testing.T) {
	k := Conflict{Object: "Deployment ns/web", Field: ".spec.replicas", Owner: `"kubectl" with subresource "scale" using apps/v1`, OwnerName: "kubectl",
		Live: "3", New: "1", AppliedAs: "helm",
		Values: "set by the value web.replicas; to keep the live value, adopt it with the spec rule {path: web.replicas, policy: adopt}, or give --set web.replicas=3"}
	refused, _ := Judge(Result{Conflicts: []Conflict{k}}, Applier{ServerSide: true, Name: "Helm applies this release", Manager: "helm"})
	assert.Contains(t, refused[0], `would fail; set by the value web.replicas; to keep the live value, adopt it with the spec rule {path: web.replicas, policy: adopt}`)
	_, warnings := Judge(Result{Conflicts: []Conflict{k}}, Applier{ServerSide: true, Force: true, Name: "Helm applies this release", Manager: "helm"})
	assert.Contains(t, warnings[0].Message, "the upgrade takes the field; set by the value web.replicas")
}

// The deployed manifest's copy of an object is found by group, kind,
// namespace and name: a Secret of the same name in another namespace, or
// a kind of the same name in another group, is another object; a version
// change and a namespace left to the release are the same object.
func TestObjectsAreMatchedByTheirWholeIdentity(t *testing.T) {
	obj := func(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
		u.SetNamespace(namespace)
		u.SetName(name)
		return u
	}
	web := identity(obj("v1", "Secret", "app", "web"), "app")
	assert.Equal(t, web, identity(obj("v1", "Secret", "", "web"), "app"), "the release's namespace")
	assert.NotEqual(t, web, identity(obj("v1", "Secret", "other", "web"), "app"))
	assert.NotEqual(t, web, identity(obj("v1", "ConfigMap", "app", "web"), "app"))
	hpa := identity(obj("autoscaling/v2", "HorizontalPodAutoscaler", "app", "web"), "app")
	assert.Equal(t, hpa, identity(obj("autoscaling/v1", "HorizontalPodAutoscaler", "app", "web"), "app"), "another version of the same object")
	assert.NotEqual(t, identity(obj("example.com/v1", "Widget", "app", "web"), "app"), identity(obj("example.org/v1", "Widget", "app", "web"), "app"))
}
