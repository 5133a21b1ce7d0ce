package managedchart

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
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
// BundleDeployment events (added, updated, deleted, deleted unseen through
// a tombstone) through the Observer's handlers, and after each event
// requires the judgement from its running counts to be the one Evaluate
// makes over every BundleDeployment as they stand: the same Ready, the
// same Waiting lines, the same NonReady lines, in the same order.
func TestIncrementalReadinessIsTheFullEvaluation(t *testing.T) {
	// keys that are prefixes of one another, with the characters names
	// may hold, so the order of the lines is put to the test
	namespaces := []string{"c", "c-1", "c.a", "ca", "cluster-a", "cluster-a-b"}
	names := []string{"mcc-app", "mcc-app-2", "mcc-app.x", "m"}
	ids := []string{"", "s-1:a", "s-2:b"}
	nonReady := [][]string{nil, {"Deployment demo/app: in-progress"}, {"Pod demo/p-1: Pending; not scheduled", "Service demo/s"}}

	want, mc, b, _ := world()
	// hashed once, as the Observer parses them
	mc.valuesHash, b.valuesHash = mc.ValuesHash(), b.ValuesHash()
	// Fleet names non-ready resources: its lines are shown
	withList := *b
	withList.Status.Summary = Summary{DesiredReady: 3, Ready: 1, NonReadyResources: []NonReadyResource{{Name: "c/x", State: "NotReady"}}}
	bundles := []*Bundle{b, &withList}

	const sequences, events = 300, 80
	for seed := range uint64(sequences) {
		rng := rand.New(rand.NewPCG(seed, 0))
		o := &Observer{tally: newTally()}
		ref := map[string]BundleDeployment{}
		var trace []string
		for step := range events {
			ns, name := namespaces[rng.IntN(len(namespaces))], names[rng.IntN(len(names))]
			key := ns + "/" + name
			switch r := rng.IntN(10); {
			case r < 7: // added or updated
				bd := BundleDeployment{Namespace: ns, Name: name, DeploymentID: ids[rng.IntN(len(ids))],
					AppliedDeploymentID: ids[rng.IntN(len(ids))], Ready: rng.IntN(2) == 0, NonReady: nonReady[rng.IntN(len(nonReady))]}
				ref[key] = bd
				o.putBD(&bdObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, BD: bd})
				trace = append(trace, fmt.Sprintf("put %s %+v", key, bd))
			case r < 9: // deleted, as seen by the watch
				o.dropBD(&bdObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, BD: ref[key]})
				delete(ref, key)
				trace = append(trace, "delete "+key)
			default: // deleted while the watch was down: a tombstone after the re-list
				o.dropBD(cache.DeletedFinalStateUnknown{Key: key})
				delete(ref, key)
				trace = append(trace, "tombstone "+key)
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
