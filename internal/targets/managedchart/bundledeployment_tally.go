package managedchart

import "github.com/google/btree"

// maxPendingLines is how many pending BundleDeployments readiness names
// when Fleet's summary names none.
const maxPendingLines = 10

// bdCounts is what readiness needs of a Bundle's BundleDeployments: how
// many there are, how many have not applied their deployment, how many
// applied it and are not ready, and, built only when asked, the lines
// naming the first maxPendingLines of those (sorted).
type bdCounts struct {
	total, notApplied, notReady int
	// failed of the notApplied report that the agent could not deploy
	// (Deployed=False); failure is one of their messages.
	failed       int
	failure      string
	pendingLines func() []string
}

// verdict is what readiness keeps of one BundleDeployment.
type verdict struct {
	applied, ready bool
	// failure is the agent's message when it could not deploy the
	// deployment it has not applied (Deployed=False); "" otherwise.
	failure string
	// firstNonReady is the first object it reports not ready, for the
	// line naming it.
	firstNonReady string
}

func verdictOf(bd BundleDeployment) verdict {
	v := verdict{applied: bd.applied(), ready: bd.Ready}
	if !v.applied {
		v.failure = bd.DeployError
	}
	if len(bd.NonReady) > 0 {
		v.firstNonReady = bd.NonReady[0]
	}
	return v
}

// pending reports whether the BundleDeployment holds readiness back.
func (v verdict) pending() bool { return !v.applied || !v.ready }

// line names the pending BundleDeployment key for a person.
func (v verdict) line(key string) string {
	if v.failure != "" {
		return key + " failed to deploy: " + v.failure
	}
	if !v.applied {
		return key + " not applied"
	}
	line := key + " not ready"
	if v.firstNonReady != "" {
		line += ": " + v.firstNonReady
	}
	return line
}

// tally is readiness kept up to date one BundleDeployment event at a time:
// a verdict per BundleDeployment, running counts, and the pending ones in
// key order. put and drop cost O(1) for the counts and O(log n) for the
// order (only when a BundleDeployment starts or stops being pending); a
// judgement reads the counts and at most maxPendingLines keys. It is not
// safe for concurrent use.
//
// The lines Evaluate sorts start with the key followed by a space, and
// keys (namespace/name) hold only characters above the space, so key order
// is line order.
type tally struct {
	verdicts             map[string]verdict // by namespace/name
	notApplied, notReady int
	failed               int
	failure              string // the message of the last failed verdict put
	pending              *btree.BTreeG[string]
}

func newTally() *tally {
	return &tally{verdicts: map[string]verdict{}, pending: btree.NewOrderedG[string](32)}
}

// put records the verdict of BundleDeployment key, replacing the one
// before.
func (t *tally) put(key string, v verdict) {
	old, had := t.verdicts[key]
	if had {
		t.count(old, -1)
	}
	t.count(v, 1)
	t.verdicts[key] = v
	if v.failure != "" {
		t.failure = v.failure
	}
	switch {
	case v.pending() && (!had || !old.pending()):
		t.pending.ReplaceOrInsert(key)
	case !v.pending() && had && old.pending():
		t.pending.Delete(key)
	}
}

// drop forgets BundleDeployment key.
func (t *tally) drop(key string) {
	old, had := t.verdicts[key]
	if !had {
		return
	}
	t.count(old, -1)
	delete(t.verdicts, key)
	if old.pending() {
		t.pending.Delete(key)
	}
}

func (t *tally) count(v verdict, d int) {
	if v.failure != "" {
		t.failed += d
	}
	switch {
	case !v.applied:
		t.notApplied += d
	case !v.ready:
		t.notReady += d
	}
}

// counts are the BundleDeployments as readiness sees them. Its lines read
// the tally: call it under the same lock as put and drop.
func (t *tally) counts() bdCounts {
	failure := ""
	if t.failed > 0 {
		failure = t.failure
	}
	return bdCounts{total: len(t.verdicts), notApplied: t.notApplied, notReady: t.notReady, failed: t.failed, failure: failure,
		pendingLines: func() []string {
			lines := make([]string, 0, min(t.pending.Len(), maxPendingLines))
			t.pending.Ascend(func(key string) bool {
				lines = append(lines, t.verdicts[key].line(key))
				return len(lines) < maxPendingLines
			})
			return lines
		}}
}
