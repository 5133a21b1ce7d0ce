package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// DefaultSecretsDir is where system-upgrade-controller mounts a Plan's
// secrets, one directory per secret.
const DefaultSecretsDir = "/run/system-upgrade/secrets"

// SpecFileName is the key of the upgrade spec in a Plan secret.
const SpecFileName = "spec.yaml"

// SUC is what system-upgrade-controller tells the upgrade container about
// itself (SYSTEM_UPGRADE_* variables): it goes into logs, Events and the
// Lease, so a person can tell which Job did what.
type SUC struct {
	Plan, PlanHash, Pod, PodUID string
}

// Attrs are the log attributes of the fields that are set.
func (s SUC) Attrs() []any {
	var out []any
	for _, kv := range [][2]string{{"plan", s.Plan}, {"plan_hash", s.PlanHash}, {"pod", s.Pod}, {"pod_uid", s.PodUID}} {
		if kv[1] != "" {
			out = append(out, kv[0], kv[1])
		}
	}
	return out
}

// String names the Job for Events: "plan P (hash H), pod N".
func (s SUC) String() string {
	out := ""
	if s.Plan != "" {
		out = "plan " + s.Plan
		if s.PlanHash != "" {
			out += " (" + Short(s.PlanHash) + ")"
		}
	}
	if s.Pod != "" {
		if out != "" {
			out += ", "
		}
		out += "pod " + s.Pod
	}
	return out
}

// DiscoverSpec finds the upgrade spec in the Plan's secret mounts: the one
// <dir>/<secret>/spec.yaml. None, or more than one, is bad input that
// says what was looked for.
func DiscoverSpec(dir string) (string, error) {
	if dir == "" {
		dir = DefaultSecretsDir
	}
	found, err := filepath.Glob(filepath.Join(dir, "*", SpecFileName))
	if err != nil {
		return "", outcome.BadInput(fmt.Errorf("looking for %s under %s: %w", SpecFileName, dir, err))
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return "", outcome.BadInput(fmt.Errorf("nothing to upgrade: give --spec FILE or --target, or run under system-upgrade-controller with the spec in a Plan secret (%s/<secret>/%s; %s does not exist)", dir, SpecFileName, dir))
		}
		return "", outcome.BadInput(fmt.Errorf("nothing to upgrade: no %s in any secret under %s (give --spec FILE or --target)", SpecFileName, dir))
	case 1:
		return found[0], nil
	default:
		return "", outcome.BadInput(fmt.Errorf("more than one upgrade spec under %s (%v): give --spec FILE", dir, found))
	}
}

// Short is the first 12 characters of a hash, for people.
func Short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
