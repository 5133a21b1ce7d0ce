package upgrade

import "fmt"

// verify checks, before the run records completion, that it ends where it
// meant to: the target as last seen (the watch's view after a wait, else
// the last read) is at the version readiness was judged for, and carries
// the record of that apply with its values still in place (for a want
// with a values hash). It reads nothing and writes nothing: a change made
// to the target between its readiness and the end of the run fails it.
func (j *jobRun) verify(p progress) error {
	want := p.want()
	if p.ready == nil && p.situation() != SituationDone {
		return fmt.Errorf("%s: readiness of version %s was never judged", j.ref, want.Version)
	}
	o := p.observed()
	if j.watch != nil {
		o = j.watch.Current()
	}
	var r Readiness
	if !JudgeTarget(&r, j.ref.Kind, o, want) || len(r.Waiting) > 0 {
		return fmt.Errorf("%s changed after it was ready for version %s: %s", j.ref, want.Version, r.Waiting)
	}
	return nil
}
