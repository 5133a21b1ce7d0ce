package phase

import (
	"fmt"
	"helm.sh/helm/v3/pkg/chart"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/journal"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// State is one chart's upgrade as the phases fill it in.
type State struct {
	Opts     *Options
	Env      *Env
	Journal  *journal.Store
	Identity string // this process's Lease identity
	Chart    spec.Chart
	Source   chartpkg.Source

	// resolve
	MC        *target.ManagedChart // as last read
	From, To  string
	NewChart  *chart.Chart
	OldChart  *chart.Chart // nil when the source lacks the deployed version
	Situation Situation

	// rollback: the backup to restore instead of merged values
	Restore *target.Backup

	// merge
	Merge      *values.Result
	MergedFrom string // mergeKey of the ManagedChart the merge read
	MergeInput values.Input
	NoChange   bool // the merge changes nothing: no write
	Want       target.Want
	Entry      journal.Entry
	Leader     bool // this process holds the Lease and applies
	lease      *journal.Lease
	stopLease  func()
	// leaseReleased: this run gave the Lease up (after its apply)
	leaseReleased bool
	leaseLost     <-chan struct{}
	events        *Events
	hooks         *hooks
	noop          bool     // resolve found the target done: nothing will be written
	hookFailures  []string // post hooks that failed, reported at the end
	observer      *target.Observer
	stopObserver  func()
}

// Ref is the target as managedchart/NAMESPACE/NAME.
func (s *State) Ref() string { return s.Chart.Target.String() }

// saveJournal records a finished phase in the journal entry of this
// upgrade. The journal is local: it never writes to the cluster.
func (s *State) saveJournal(phase string, rec journal.Record) error {
	if s.Journal == nil || s.To == "" {
		return nil
	}
	if s.Entry.Target == "" {
		e, ok, err := s.Journal.Load(s.Ref(), s.To)
		if err != nil {
			return err
		}
		// a finished entry of an earlier upgrade to this version (say, before
		// a rollback) is not this upgrade's: start afresh unless the target
		// is still what that entry finished
		if !ok || (e.Completed && s.Situation != SituationDone && s.Situation != SituationApplied) {
			e = journal.Entry{Target: s.Ref(), FromVersion: s.From, ToVersion: s.To}
		}
		s.Entry = e
	}
	if s.Entry.Phases == nil {
		s.Entry.Phases = map[string]journal.Record{}
	}
	// the hash of the values this run applies or waits for: merged, restored
	// from a backup (rollback, no merge), or applied by another process
	switch {
	case s.Want.ValuesHash != "":
		s.Entry.ValuesHash = s.Want.ValuesHash
	case s.Merge != nil:
		s.Entry.ValuesHash = s.Merge.SHA256
	}
	s.Entry.Phases[phase] = rec
	return s.Journal.Save(s.Entry)
}

// mergeKey is all that computeMerge reads of a ManagedChart: its version,
// the hash of its values, whether it is paused, and the apply recorded on
// it. A status write (Rancher copies the Bundle's status on every change)
// changes the resourceVersion but not the key, so it needs no new merge.
func mergeKey(mc *target.ManagedChart) string {
	w, _ := mc.AppliedWant()
	return fmt.Sprintf("%s@%s paused=%t applied=%s@%s", mc.Version, mc.ValuesHash(), mc.Paused, w.Version, w.ValuesHash)
}
