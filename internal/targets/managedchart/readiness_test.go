package managedchart

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// world is a ready ManagedChart at 2.0.0 with its Bundle and one
// BundleDeployment; each case breaks one thing.
func world() (upgrade.Want, *ManagedChart, *Bundle, []BundleDeployment) {
	vals := map[string]any{"a": int64(1)}
	mc := &ManagedChart{Name: "app", Namespace: "fleet-local", Version: "2.0.0", Values: vals, Annotations: map[string]string{}}
	want := upgrade.Want{Version: "2.0.0", ValuesHash: mc.ValuesHash()}
	mc.Annotations[AnnotationVersion], mc.Annotations[AnnotationValuesHash] = want.Version, want.ValuesHash
	b := &Bundle{Name: "mcc-app", Generation: 4, HelmVersion: "2.0.0", Values: vals, HasValues: true,
		Status: BundleStatus{ObservedGeneration: 4, Conditions: []Condition{{Type: "Ready", Status: "True"}},
			Summary: Summary{DesiredReady: 1, Ready: 1}}}
	bds := []BundleDeployment{{Namespace: "cluster-a", Name: "mcc-app", DeploymentID: "s-1:2", AppliedDeploymentID: "s-1:2", Ready: true}}
	return want, mc, b, bds
}

// evaluateCase breaks one thing of world().
type evaluateCase struct {
	name    string
	breakIt func(w *upgrade.Want, mc *ManagedChart, b **Bundle, bds *[]BundleDeployment)
	waiting string // a fragment of the first reason; "" = ready
}

// evaluateCases are the cases of readiness, each with one thing broken.
var evaluateCases = []evaluateCase{
	{"all good", func(*upgrade.Want, *ManagedChart, **Bundle, *[]BundleDeployment) {}, ""},
	{"target at another version", func(_ *upgrade.Want, mc *ManagedChart, _ **Bundle, _ *[]BundleDeployment) { mc.Version = "1.0.0" }, `spec.version is "1.0.0"`},
	{"target not annotated (someone else's change)", func(_ *upgrade.Want, mc *ManagedChart, _ **Bundle, _ *[]BundleDeployment) {
		delete(mc.Annotations, AnnotationValuesHash)
	}, "not annotated"},
	{"target values changed since the apply", func(_ *upgrade.Want, mc *ManagedChart, _ **Bundle, _ *[]BundleDeployment) {
		mc.Values = map[string]any{"a": int64(2)}
	}, "values differ"},
	{"target paused", func(_ *upgrade.Want, mc *ManagedChart, _ **Bundle, _ *[]BundleDeployment) { mc.Paused = true }, "paused"},
	{"no bundle yet", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) { *b = nil }, "does not exist yet"},
	{"stale: bundle still at the old version, Ready", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).HelmVersion = "1.0.0"
	}, `at version "1.0.0"`},
	{"stale: bundle without the applied values", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).Values = map[string]any{"a": int64(0)}
	}, "does not carry the applied values"},
	{"values moved to a secret: not compared", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).HasValues, (*b).Values = false, nil
	}, ""},
	{"stale: Ready for the old generation", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).Generation = 5
	}, "generation 5 not observed"},
	{"bundle paused", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) { (*b).Paused = true }, "is paused"},
	{"no bundledeployments", func(_ *upgrade.Want, _ *ManagedChart, _ **Bundle, bds *[]BundleDeployment) { *bds = nil }, "no clusters of mcc-app yet"},
	{"deployment not applied", func(_ *upgrade.Want, _ *ManagedChart, _ **Bundle, bds *[]BundleDeployment) {
		(*bds)[0].DeploymentID = "s-3:4"
	}, "have not applied"},
	{"deployment not ready", func(_ *upgrade.Want, _ *ManagedChart, _ **Bundle, bds *[]BundleDeployment) {
		(*bds)[0].Ready = false
	}, "are not ready"},
	{"summary: nothing desired", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).Status.Summary = Summary{}
	}, "0 of 0 clusters ready"},
	{"summary: not all ready", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).Status.Summary = Summary{DesiredReady: 3, Ready: 2}
	}, "2 of 3 clusters ready"},
	{"unavailable", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) { (*b).Status.Unavailable = 1 }, "1 unavailable"},
	{"Ready condition false", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).Status.Conditions = []Condition{{Type: "Ready", Status: "False", Message: "waiting for rollout"}}
	}, "not Ready: waiting for rollout"},
	{"no Ready condition", func(_ *upgrade.Want, _ *ManagedChart, b **Bundle, _ *[]BundleDeployment) {
		(*b).Status.Conditions = nil
	}, "no Ready condition"},
	{"without a hash, only the version counts", func(w *upgrade.Want, mc *ManagedChart, _ **Bundle, _ *[]BundleDeployment) {
		w.ValuesHash = ""
		mc.Annotations = map[string]string{}
	}, ""},
}

func TestEvaluate(t *testing.T) {
	for _, tc := range evaluateCases {
		t.Run(tc.name, func(t *testing.T) {
			want, mc, b, bds := world()
			tc.breakIt(&want, mc, &b, &bds)
			r := Evaluate(want, mc, b, bds)
			if tc.waiting == "" {
				assert.True(t, r.Ready, "waiting: %v", r.Waiting)
				return
			}
			assert.False(t, r.Ready)
			assert.True(t, strings.Contains(strings.Join(r.Waiting, "\n"), tc.waiting), "want %q in %v", tc.waiting, r.Waiting)
		})
	}
}

// JudgeBySummary decides as Evaluate does on everything the target and the
// Bundle say: a case broken there is not ready, with the same reason. A
// BundleDeployment broken while Fleet's summary still counts every cluster
// ready cannot happen for an observed generation (Fleet computes the
// summary from them); the summary is what it trusts, so the cases that
// break only BundleDeployments are left out.
func TestJudgeBySummary(t *testing.T) {
	onlyBDs := map[string]bool{"no bundledeployments": true, "deployment not applied": true, "deployment not ready": true}
	for _, tc := range evaluateCases {
		if onlyBDs[tc.name] {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			want, mc, b, bds := world()
			tc.breakIt(&want, mc, &b, &bds)
			r := JudgeBySummary(want, mc, b)
			if tc.waiting == "" {
				assert.True(t, r.Ready, "waiting: %v", r.Waiting)
				return
			}
			assert.False(t, r.Ready)
			assert.True(t, strings.Contains(strings.Join(r.Waiting, "\n"), tc.waiting), "want %q in %v", tc.waiting, r.Waiting)
		})
	}
	// the summary counts a cluster that has not applied the deployment as
	// not ready: never ready by the summary then
	want, mc, b, _ := world()
	b.Status.Summary = Summary{DesiredReady: 1, WaitApplied: 1}
	assert.False(t, JudgeBySummary(want, mc, b).Ready)
}

// The failures Fleet and Rancher report for what was applied: as real
// Fleet shows them, ErrApplied leaves the BundleDeployment ready (from the
// deployment before) with the new deployment not applied and Deployed
// False; only a failure of the Bundle we applied counts.
func TestEvaluateFailures(t *testing.T) {
	errApplied := func(msg string) func(*ManagedChart, *Bundle, []BundleDeployment) {
		return func(_ *ManagedChart, _ *Bundle, bds []BundleDeployment) {
			bds[0].DeploymentID, bds[0].DeployError = "s-9:new", msg
		}
	}
	for _, tc := range []struct {
		name    string
		breakIt func(mc *ManagedChart, b *Bundle, bds []BundleDeployment)
		failed  string // a fragment of Failed; "" = none
	}{
		{"ErrApplied: the agent could not deploy it", errApplied("broken.yaml:6:15: nil pointer"),
			"ErrApplied: 1 of 1 clusters could not deploy it: broken.yaml:6:15: nil pointer"},
		{"ErrApplied in Fleet's words once the Bundle counts it", func(mc *ManagedChart, b *Bundle, bds []BundleDeployment) {
			errApplied("nil pointer")(mc, b, bds)
			b.Status.Summary = Summary{DesiredReady: 1, ErrApplied: 1}
			b.Status.Conditions = []Condition{{Type: "Ready", Status: "False", Message: "ErrApplied(1) [Cluster fleet-local/local: nil pointer]"}}
		}, "could not deploy it: ErrApplied(1) [Cluster fleet-local/local: nil pointer]"},
		{"Helm's wait timed out: a rollout that did not finish", func(mc *ManagedChart, b *Bundle, bds []BundleDeployment) {
			b.HelmTimeoutSeconds = 20
			errApplied("resource Deployment/s/slow-wait not ready. status: InProgress, message: Pending termination: 1 context deadline exceeded")(mc, b, bds)
		}, "the rollout did not finish within Helm's wait (helm.timeoutSeconds 20) on 1 of 1 clusters: resource Deployment/s/slow-wait not ready"},
		{"an older failure while the Bundle is not ours yet does not count", func(mc *ManagedChart, b *Bundle, bds []BundleDeployment) {
			errApplied("old failure")(mc, b, bds)
			b.HelmVersion = "1.0.0"
		}, ""},
		{"nor before Fleet observed our generation", func(mc *ManagedChart, b *Bundle, bds []BundleDeployment) {
			errApplied("old failure")(mc, b, bds)
			b.Generation = 5
		}, ""},
		{"Deployed=False of a deployment applied since does not count", func(_ *ManagedChart, _ *Bundle, bds []BundleDeployment) {
			bds[0].DeployError = "stale"
		}, ""},
		{"Rancher cannot define the chart", func(mc *ManagedChart, b *Bundle, _ []BundleDeployment) {
			mc.Status.Conditions = []Condition{{Type: "Defined", Status: "False", Message: "no chart version found for app-2.0.0"}}
			b.HelmVersion = "1.0.0"
		}, "Defined=False): no chart version found for app-2.0.0"},
		{"Defined=True is no failure", func(mc *ManagedChart, _ *Bundle, _ []BundleDeployment) {
			mc.Status.Conditions = []Condition{{Type: "Defined", Status: "True"}}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, mc, b, bds := world()
			tc.breakIt(mc, b, bds)
			r := Evaluate(want, mc, b, bds)
			if tc.failed == "" {
				assert.Empty(t, r.Failed)
				return
			}
			assert.False(t, r.Ready)
			assert.Contains(t, r.Failed, tc.failed)
			assert.Contains(t, r.Progress(), "failed: ")
		})
	}
	// the failing BundleDeployment is named with its error
	want, mc, b, bds := world()
	errApplied("boom")(mc, b, bds)
	assert.Equal(t, []string{"cluster-a/mcc-app failed to deploy: boom"}, Evaluate(want, mc, b, bds).NonReady)
}

// The failures as the wait sees them, from the Bundle's summary alone: an
// ErrApplied of the generation we applied, in Fleet's words (its Ready
// message, else the cluster's), never one of an older generation.
func TestJudgeBySummaryFailures(t *testing.T) {
	errApplied := func(b *Bundle, msg string) {
		b.Status.Summary = Summary{DesiredReady: 2, Ready: 1, ErrApplied: 1,
			NonReadyResources: []NonReadyResource{{Name: "fleet-local/local", State: "ErrApplied", Message: msg}}}
		b.Status.Unavailable = 1
		b.Status.Conditions = []Condition{{Type: "Ready", Status: "False"}}
	}
	for _, tc := range []struct {
		name    string
		breakIt func(b *Bundle)
		failed  string // a fragment of Failed; "" = none
	}{
		{"the cluster's message", func(b *Bundle) { errApplied(b, "conflict with kubectl-set") },
			"ErrApplied: 1 of 2 clusters could not deploy it: conflict with kubectl-set"},
		{"Fleet's Ready message wins", func(b *Bundle) {
			errApplied(b, "nil pointer")
			b.Status.Conditions[0].Message = "ErrApplied(1) [Cluster fleet-local/local: nil pointer]"
		}, "could not deploy it: ErrApplied(1) [Cluster fleet-local/local: nil pointer]"},
		{"Helm's wait timed out", func(b *Bundle) {
			b.HelmTimeoutSeconds = 20
			errApplied(b, "resource Deployment/s/slow not ready. status: InProgress context deadline exceeded")
		}, "the rollout did not finish within Helm's wait (helm.timeoutSeconds 20) on 1 of 2 clusters"},
		{"not before Fleet observed our generation", func(b *Bundle) {
			errApplied(b, "old failure")
			b.Generation = 5
		}, ""},
		{"not while the Bundle is not ours yet", func(b *Bundle) {
			errApplied(b, "old failure")
			b.HelmVersion = "1.0.0"
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, mc, b, _ := world()
			tc.breakIt(b)
			r := JudgeBySummary(want, mc, b)
			assert.False(t, r.Ready)
			if tc.failed == "" {
				assert.Empty(t, r.Failed)
				return
			}
			assert.Contains(t, r.Failed, tc.failed)
			assert.Contains(t, r.Waiting, "1 of 2 clusters have not applied the deployment")
		})
	}
}

func TestEvaluateNilTarget(t *testing.T) {
	r := Evaluate(upgrade.Want{Version: "1"}, nil, nil, nil)
	assert.False(t, r.Ready)
	assert.Equal(t, []string{"the managedchart does not exist"}, r.Waiting)
}

func TestProgressNamesTheFirstNonReadyResource(t *testing.T) {
	want, mc, b, bds := world()
	b.Status.Summary = Summary{DesiredReady: 2, Ready: 1, NonReadyResources: []NonReadyResource{
		{Name: "cluster-b", State: "NotReady", Details: []string{"Deployment harvester-system/harvester: 1 of 3 updated"}},
		{Name: "cluster-c", State: "WaitApplied"},
	}}
	p := Evaluate(want, mc, b, bds).Progress()
	assert.Contains(t, p, "ready 1/2")
	assert.Contains(t, p, "cluster-b (NotReady); Deployment harvester-system/harvester: 1 of 3 updated (+1 more)")
}

func TestHealth(t *testing.T) {
	_, mc, b, _ := world()
	assert.True(t, Health(mc, b).Healthy())

	b.Status.Summary.ErrApplied = 1
	b.Status.Conditions = []Condition{{Type: "Ready", Status: "False", Message: "ErrApplied(1) [Cluster local: boom]"}}
	b.Status.Summary.NonReadyResources = []NonReadyResource{{Name: "fleet-local/local", State: "ErrApplied", Message: "boom"}}
	h := Health(mc, b)
	assert.Equal(t, []string{
		"bundle mcc-app: 1 cluster(s) in ErrApplied",
		"bundle mcc-app is not Ready: ErrApplied(1) [Cluster local: boom]",
		"  fleet-local/local (ErrApplied): boom",
	}, h.Problems)
	assert.Empty(t, h.Drift)

	// without a bundle, the ManagedChart's copy of the status is judged
	mc.Status = BundleStatus{Summary: Summary{Modified: 2}, Conditions: []Condition{{Type: "Ready", Status: "True"}}}
	assert.Equal(t, []string{"managedchart status: 2 cluster(s) Modified"}, Health(mc, nil).Problems)

	// a Bundle that matches no cluster reads Ready to Fleet: refused
	_, mc, b, _ = world()
	b.Status.Summary = Summary{}
	assert.Equal(t, []string{"bundle mcc-app matches no cluster (desiredReady 0): Fleet calls it Ready with nothing deployed, " +
		"and no upgrade of it could ever be seen ready; check the ManagedChart's targets (spec.targets, the clusters' labels)"}, Health(mc, b).Problems)
}

// A ready summary stands only when the BundleDeployments read at that
// moment agree; a stale one (the new observedGeneration over the previous
// generation's Ready summary) waits, naming why, and never reports a
// failure of its own.
func TestConfirmTrustsNoStaleReadySummary(t *testing.T) {
	want, mc, b, bds := world()
	r := JudgeBySummary(want, mc, b)
	require.True(t, r.Ready, r.Waiting)
	assert.Equal(t, r, Confirm(r, b, bds, false), "they agree: the summary's judgement stands")
	assert.Equal(t, r, Confirm(r, b, bds, true), "a page that agrees")

	stale := append([]BundleDeployment(nil), bds...)
	stale[0].AppliedDeploymentID = "old"
	stale[0].DeployError = "an older deployment's error"
	c := Confirm(r, b, stale, false)
	assert.False(t, c.Ready)
	assert.Empty(t, c.Failed)
	require.NotEmpty(t, c.Waiting)
	assert.Contains(t, c.Waiting[0], "summary says ready, its BundleDeployments do not yet")
	assert.Contains(t, c.Waiting[0], "of 1 read, 1 behind")
	assert.Contains(t, c.Waiting[1], "has not applied its deployment")

	notApplied := append([]BundleDeployment(nil), bds...)
	notApplied[0].Ready = false
	assert.Contains(t, Confirm(r, b, notApplied, true).Waiting[1], "is not ready")
	assert.False(t, Confirm(r, b, nil, false).Ready, "no BundleDeployment at all")

	notReady := JudgeBySummary(want, mc, nil)
	assert.Equal(t, notReady, Confirm(notReady, b, nil, false), "a judgement that is not ready is not confirmed")
}

// Drift is returned apart, for the preflight to weigh, only when it is all
// that keeps the Bundle from Ready and Fleet names every changed object.
func TestHealthDrift(t *testing.T) {
	sc := upgrade.Drift{Object: values.ObjectRef{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: "longhorn"},
		Patch: `{"metadata":{"annotations":{"x":"true"}}}`}
	modified := func(b *Bundle) {
		b.Status.Summary = Summary{DesiredReady: 1, Modified: 1, NonReadyResources: []NonReadyResource{{Name: "fleet-local/local",
			State: "Modified", Details: []string{"StorageClass longhorn modified " + sc.Patch}, Modified: []upgrade.Drift{sc}}}}
		b.Status.Conditions = []Condition{{Type: "Ready", Status: "False", Message: "Modified(1) [Cluster fleet-local/local]"}}
	}
	_, mc, b, _ := world()
	modified(b)
	h := Health(mc, b)
	assert.Empty(t, h.Problems)
	assert.Equal(t, []upgrade.Drift{sc}, h.Drift)

	for name, breakIt := range map[string]func(b *Bundle){
		"also a cluster not ready": func(b *Bundle) { b.Status.Summary.DesiredReady, b.Status.Summary.NotReady = 2, 1 },
		"a missing object too": func(b *Bundle) {
			b.Status.Summary.NonReadyResources[0].Details = append(b.Status.Summary.NonReadyResources[0].Details, "ConfigMap a/b missing")
		},
		"Fleet lists fewer than it counts": func(b *Bundle) { b.Status.Summary.Modified, b.Status.Summary.DesiredReady = 2, 2 },
		"ErrApplied as well":               func(b *Bundle) { b.Status.Summary.ErrApplied = 1 },
	} {
		_, mc, b, _ := world()
		modified(b)
		breakIt(b)
		h := Health(mc, b)
		assert.Empty(t, h.Drift, name)
		assert.NotEmpty(t, h.Problems, name)
	}
}

// Fleet writes the patch of a changed object into its messages; for a
// Secret that is its data, which chart-upgrader never prints.
func TestRedactSecretPatches(t *testing.T) {
	msg := `Modified(1) [Cluster fleet-local/local]; configmap.v1 ns/cm modified {"data":{"a":"1"}}; ` +
		`secret.v1 ns/creds modified {"data":{"password":"aHVudGVyMg==","x":"{\"}"}}; deployment.apps ns/web modified {"spec":{}}`
	got := RedactSecretPatches(msg)
	assert.NotContains(t, got, "aHVudGVyMg==")
	assert.Equal(t, `Modified(1) [Cluster fleet-local/local]; configmap.v1 ns/cm modified {"data":{"a":"1"}}; `+
		`secret.v1 ns/creds modified <redacted: the change of a Secret>; deployment.apps ns/web modified {"spec":{}}`, got)
	assert.Equal(t, "no patch here", RedactSecretPatches("no patch here"))
}

func TestASecretsDriftPatchIsRedacted(t *testing.T) {
	s := parseBundleStatus(map[string]any{"summary": map[string]any{"nonReadyResources": []any{map[string]any{
		"name": "fleet-local/local", "bundleState": "Modified",
		"modifiedStatus": []any{
			map[string]any{"apiVersion": "v1", "kind": "Secret", "namespace": "ns", "name": "creds", "patch": `{"data":{"password":"aHVudGVyMg=="}}`},
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "cm", "patch": `{"data":{"a":"1"}}`},
		}}}}})
	nr := s.Summary.NonReadyResources[0]
	require.Len(t, nr.Modified, 2)
	assert.Equal(t, redactedPatch, nr.Modified[0].Patch)
	assert.Equal(t, `{"data":{"a":"1"}}`, nr.Modified[1].Patch)
	assert.NotContains(t, strings.Join(nr.Details, "\n"), "aHVudGVyMg==")
}

// The Bundle statuses real Fleet v0.16.1 wrote, one watch event after
// another, for each kind of rollout (observed on a real Fleet, see
// docs/design.md §4.2): judged by the summary alone, the target is ready
// at the write that made Fleet call it ready and never before, and only
// an ErrApplied of our generation fails it.
func TestJudgeBySummaryNeverReadyBeforeFleetIs(t *testing.T) {
	type step struct {
		gen, observed int64
		paused        bool
		sum           Summary
		unavailable   int64
		ready         string // the Ready condition's status
		msg           string // its message
	}
	oldReady := func(gen int64) step {
		return step{gen: gen, observed: gen - 1, sum: Summary{DesiredReady: 1, Ready: 1}, ready: "True"}
	}
	waitApplied := func(gen int64, unavailable int64) step {
		return step{gen: gen, observed: gen, sum: Summary{DesiredReady: 1, WaitApplied: 1,
			NonReadyResources: []NonReadyResource{{Name: "fleet-local/local", State: "WaitApplied"}}},
			unavailable: unavailable, ready: "False", msg: "WaitApplied(1) [Cluster fleet-local/local]"}
	}
	readyAt := func(gen int64) step {
		return step{gen: gen, observed: gen, sum: Summary{DesiredReady: 1, Ready: 1}, ready: "True"}
	}
	for _, tc := range []struct {
		name   string
		steps  []step
		ready  bool   // the last step is ready
		failed string // the last step failed with this
	}{
		{"a change of values or version (§1)", []step{
			oldReady(3), // the old status, one generation behind, for ~50 ms
			waitApplied(3, 1),
			{gen: 3, observed: 3, sum: Summary{DesiredReady: 1, NotReady: 1}, unavailable: 1, ready: "False",
				msg: "NotReady(1) [Cluster fleet-local/local]; deployment.apps probe-system/probe [progressing] Updated: 0/1"},
			readyAt(3),
		}, true, ""},
		{"paused, then unpaused (§3)", []step{
			oldReady(10),
			{gen: 10, observed: 10, paused: true, sum: Summary{DesiredReady: 1, WaitApplied: 1}, ready: "False", msg: "WaitApplied(1)"},
			{gen: 11, observed: 10, sum: Summary{DesiredReady: 1, WaitApplied: 1}, ready: "False", msg: "WaitApplied(1)"},
			waitApplied(11, 1),
			readyAt(11),
		}, true, ""},
		{"a chart that fails: ErrApplied (§4)", []step{
			oldReady(12),
			waitApplied(12, 1),
			{gen: 12, observed: 12, sum: Summary{DesiredReady: 1, ErrApplied: 1,
				NonReadyResources: []NonReadyResource{{Name: "fleet-local/local", State: "ErrApplied", Message: "nil pointer evaluating interface {}.deeper"}}},
				unavailable: 1, ready: "False", msg: "ErrApplied(1) [Cluster fleet-local/local: nil pointer evaluating interface {}.deeper]"},
		}, false, "ErrApplied(1) [Cluster fleet-local/local: nil pointer evaluating interface {}.deeper]"},
		{"a field-manager conflict: WaitApplied without a message, for good (§10)", []step{
			oldReady(14),
			waitApplied(14, 1),
			waitApplied(14, 1),
		}, false, ""},
		{"drift: Modified (§5)", []step{
			{gen: 7, observed: 7, sum: Summary{DesiredReady: 1, Modified: 1}, ready: "False", msg: "Modified(1) [Cluster fleet-local/local]"},
		}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, mc, b, _ := world()
			for i, s := range tc.steps {
				b.Generation, b.Paused = s.gen, s.paused
				b.Status = BundleStatus{ObservedGeneration: s.observed, Summary: s.sum, Unavailable: s.unavailable,
					Conditions: []Condition{{Type: "Ready", Status: s.ready, Message: s.msg}}}
				r := JudgeBySummary(want, mc, b)
				last := i == len(tc.steps)-1
				if last && tc.ready {
					assert.True(t, r.Ready, "step %d: waiting %v", i, r.Waiting)
					continue
				}
				assert.False(t, r.Ready, "step %d is not ready for Fleet", i)
				if last && tc.failed != "" {
					assert.Contains(t, r.Failed, tc.failed)
				} else {
					assert.Empty(t, r.Failed, "step %d", i)
				}
			}
		})
	}
}

// A failure counted from a Deployed=False older than its
// BundleDeployment's spec is an older deployment's: it waits, naming it.
// One as new as the spec, or of unknown age, stays a failure.
func TestConfirmFailureTellsAnOlderDeploymentsError(t *testing.T) {
	_, _, b, bds := world()
	r := upgrade.Readiness{Failed: "ErrApplied: 1 of 1 clusters could not deploy it: boom"}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	bd := bds[0]
	bd.DeployError, bd.DeployErrorAt, bd.SpecAt = "boom", t0, t0.Add(2*time.Second)
	c := ConfirmFailure(r, b, []BundleDeployment{bd})
	assert.Empty(t, c.Failed)
	assert.False(t, c.Ready)
	require.NotEmpty(t, c.Waiting)
	assert.Contains(t, c.Waiting[0], "counts ErrApplied, but the failure is an older deployment's")
	assert.Contains(t, c.Waiting[0], "Deployed=False since 2026-11-27T10:00:00Z, its deployment asked at 2026-11-27T10:00:02Z")

	for name, change := range map[string]func(*BundleDeployment){
		"as new as the spec":    func(bd *BundleDeployment) { bd.SpecAt = bd.DeployErrorAt },
		"a second older":        func(bd *BundleDeployment) { bd.SpecAt = bd.DeployErrorAt.Add(time.Second) },
		"newer than the spec":   func(bd *BundleDeployment) { bd.DeployErrorAt = bd.SpecAt.Add(time.Second) },
		"no lastUpdateTime":     func(bd *BundleDeployment) { bd.DeployErrorAt = time.Time{} },
		"no managedFields time": func(bd *BundleDeployment) { bd.SpecAt = time.Time{} },
	} {
		cur := bd
		change(&cur)
		assert.Equal(t, r, ConfirmFailure(r, b, []BundleDeployment{cur}), name)
	}
	assert.Equal(t, r, ConfirmFailure(r, b, bds), "no BundleDeployment shows an error: the summary's failure stands")
}
