package phase

import (
	"github.com/Masterminds/semver/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/target"
)

// Situation is where a target stands relative to the wanted version. It is
// worked out first, from what was read, and the action is picked from it.
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

// Assess works out the situation of a ManagedChart for the wanted version.
// ready is the readiness judged for the annotated (applied) version and
// values; it matters only when those match.
func Assess(mc *target.ManagedChart, want string, ready bool) Situation {
	applied := mc.Annotations[target.AnnotationVersion] == want &&
		mc.Annotations[target.AnnotationValuesHash] != "" &&
		mc.Annotations[target.AnnotationValuesHash] == mc.ValuesHash() &&
		mc.Version == want
	switch {
	case applied && ready:
		return SituationDone
	case applied:
		return SituationApplied
	case mc.Version == want:
		return SituationSameVersion
	case isDowngrade(mc.Version, want):
		return SituationDowngrade
	default:
		return SituationUpgrade
	}
}

func isDowngrade(from, to string) bool {
	f, err1 := semver.NewVersion(from)
	t, err2 := semver.NewVersion(to)
	return err1 == nil && err2 == nil && t.LessThan(f)
}
