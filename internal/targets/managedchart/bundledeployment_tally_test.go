package managedchart

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTallyCounts(t *testing.T) {
	tl := newTally()
	ready := verdict{applied: true, ready: true}
	tl.put("a/x", verdict{})
	tl.put("a/y", verdict{applied: true, firstNonReady: "Deployment d/app: in-progress"})
	tl.put("a/z", ready)
	c := tl.counts()
	assert.Equal(t, [3]int{3, 1, 1}, [3]int{c.total, c.notApplied, c.notReady})
	assert.Equal(t, []string{"a/x not applied", "a/y not ready: Deployment d/app: in-progress"}, c.pendingLines())

	tl.put("a/x", ready) // updated: now ready
	tl.drop("a/y")
	tl.drop("a/never") // a tombstone of one never seen
	c = tl.counts()
	assert.Equal(t, [3]int{2, 0, 0}, [3]int{c.total, c.notApplied, c.notReady})
	assert.Empty(t, c.pendingLines())
	assert.Zero(t, tl.pending.Len())
}

func TestTallyNamesTheFirstTenPendingInOrder(t *testing.T) {
	tl := newTally()
	for i := range 25 {
		tl.put(fmt.Sprintf("cluster-%02d/mcc-app", 24-i), verdict{})
	}
	lines := tl.counts().pendingLines()
	require.Len(t, lines, maxPendingLines)
	assert.Equal(t, "cluster-00/mcc-app not applied", lines[0])
	assert.Equal(t, "cluster-09/mcc-app not applied", lines[9])
}

// TestIncrementalReadinessIsTheFullEvaluation drives random sequences of
// BundleDeployment events (added, updated, deleted, and lists made again
// after some were deleted unseen) through the Observer, and after each
// event requires the judgement from its running counts to be the one
// Evaluate makes over every BundleDeployment as they stand: the same
// Ready, the same Waiting lines, the same NonReady lines, in the same
// order.
func TestIncrementalReadinessIsTheFullEvaluation(t *testing.T) {
	// keys that are prefixes of one another, with the characters names
	// may hold, so the order of the lines is put to the test
	namespaces := []string{"c", "c-1", "c.a", "ca", "cluster-a", "cluster-a-b"}
	names := []string{"mcc-app", "mcc-app-2", "mcc-app.x", "m"}
	ids := []string{"", "s-1:a", "s-2:b"}
	nonReady := [][]string{nil, {"Deployment demo/app: in-progress"}, {"Pod demo/p-1: Pending; not scheduled", "Service demo/s"}}
	// one message: which failing BundleDeployment's message is shown is
	// not part of the judgement's contract
	deployErrors := []string{"", "", "template: app/templates/x.yaml:3: nil pointer"}

	want, mc, b, _ := world()
	// hashed once, as the Observer parses them
	mc.valuesHash, b.valuesHash = mc.ValuesHash(), b.ValuesHash()
	// Fleet names non-ready resources: its lines are shown
	withList := *b
	withList.Status.Summary = Summary{DesiredReady: 3, Ready: 1, NonReadyResources: []NonReadyResource{{Name: "c/x", State: "NotReady"}}}
	// Fleet counts the failure and says it in the Ready condition
	errApplied := *b
	errApplied.Status.Summary = Summary{DesiredReady: 3, ErrApplied: 1}
	errApplied.Status.Conditions = []Condition{{Type: "Ready", Status: "False", Message: "ErrApplied(1) [Cluster c/x: boom]"}}
	bundles := []*Bundle{b, &withList, &errApplied}

	const sequences, events = 300, 80
	for seed := range uint64(sequences) {
		rng := rand.New(rand.NewPCG(seed, 0))
		o := &Observer{tally: newTally(), changed: make(chan struct{}, 1)}
		ref := map[string]BundleDeployment{}
		var trace []string
		for step := range events {
			ns, name := namespaces[rng.IntN(len(namespaces))], names[rng.IntN(len(names))]
			key := ns + "/" + name
			switch r := rng.IntN(20); {
			case r < 14: // added or updated
				bd := BundleDeployment{Namespace: ns, Name: name, DeploymentID: ids[rng.IntN(len(ids))],
					AppliedDeploymentID: ids[rng.IntN(len(ids))], Ready: rng.IntN(2) == 0, NonReady: nonReady[rng.IntN(len(nonReady))],
					DeployError: deployErrors[rng.IntN(len(deployErrors))]}
				ref[key] = bd
				o.putBD(bdItem{BD: bd})
				trace = append(trace, fmt.Sprintf("put %s %+v", key, bd))
			case r < 18: // deleted (also one never seen)
				delete(ref, key)
				o.dropBD(key)
				trace = append(trace, "delete "+key)
			default: // the watch broke; some were deleted meanwhile; listed again
				for k := range ref {
					if rng.IntN(3) == 0 {
						delete(ref, k)
					}
				}
				list := slices.Collect(maps.Values(ref))
				rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
				fresh := newTally()
				for _, bd := range list {
					fresh.put(bdItem{BD: bd}.key(), verdictOf(bd))
				}
				o.tally = fresh // as listBDs does
				trace = append(trace, fmt.Sprintf("list %d", len(list)))
			}
			bds := slices.Collect(maps.Values(ref))
			rng.Shuffle(len(bds), func(i, j int) { bds[i], bds[j] = bds[j], bds[i] })
			for _, bundle := range bundles {
				full := Evaluate(want, mc, bundle, bds)
				incremental := judge(want, mc, bundle, o.tally.counts())
				if !assert.Equal(t, full, incremental, "seed %d, after event %d of:\n%v", seed, step, trace) {
					return
				}
			}
		}
	}
}

func TestBundleDeploymentEventsWakeTheWaitOnlyWhenTheyMayMakeItReady(t *testing.T) {
	o := &Observer{tally: newTally(), changed: make(chan struct{}, 1), signalEvery: time.Hour}
	woken := func() bool {
		select {
		case <-o.changed:
			return true
		default:
			return false
		}
	}
	pending := BundleDeployment{Namespace: "c", Name: "a", DeploymentID: "s-2"}
	o.putBD(bdItem{BD: pending})
	o.putBD(bdItem{BD: BundleDeployment{Namespace: "c", Name: "b", DeploymentID: "s-2"}})
	assert.False(t, woken(), "some pending: no judgement now")
	assert.True(t, o.signalLater, "but one later (for the progress line)")

	ready := pending
	ready.AppliedDeploymentID, ready.Ready = "s-2", true
	o.putBD(bdItem{BD: ready})
	assert.False(t, woken(), "one still pending")
	o.dropBD("c/b")
	assert.True(t, woken(), "none pending any more: judged at once")

	o = &Observer{tally: newTally(), changed: make(chan struct{}, 1), signalEvery: time.Millisecond}
	o.putBD(bdItem{BD: pending})
	select {
	case <-o.changed:
	case <-time.After(time.Minute): // only a hang
		t.Fatal("the later wake-up never came")
	}
}
