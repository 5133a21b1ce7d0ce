package upgrade

import "github.com/Masterminds/semver/v3"

// Situation is where a target stands relative to the wanted version. It is
// worked out from what was read, and the next step is picked from it.
type Situation string

// The situations.
const (
	// SituationUpgrade: the target is at another version; merge and apply.
	SituationUpgrade Situation = "upgrade"
	// SituationSameVersion: at the wanted version, not by our hand (or its
	// values changed since): merge, and write only if the values change.
	SituationSameVersion Situation = "same-version"
	// SituationApplied: we applied this version and values; wait for it.
	SituationApplied Situation = "applied"
	// SituationDone: we applied it and it is ready; nothing to do.
	SituationDone Situation = "done"
	// SituationDowngrade: the wanted version is older than the deployed one.
	SituationDowngrade Situation = "downgrade"
)

// Assess works out the situation of a target for the wanted version.
// ready is the readiness judged for the recorded (applied) version and
// values; it matters only when those match.
func Assess(o *Observed, want string, ready bool) Situation {
	applied := o.AppliedHere(want)
	switch {
	case applied && ready:
		return SituationDone
	case applied:
		return SituationApplied
	case o.Version == want:
		return SituationSameVersion
	case isDowngrade(o.Version, want):
		return SituationDowngrade
	default:
		return SituationUpgrade
	}
}

// ours reports whether the situation is an apply of ours: a target mid-
// rollout or done, not one to check, merge or write.
func (s Situation) ours() bool { return s == SituationApplied || s == SituationDone }

func isDowngrade(from, to string) bool {
	f, err1 := semver.NewVersion(from)
	t, err2 := semver.NewVersion(to)
	return err1 == nil && err2 == nil && t.LessThan(f)
}
