// Package kind describes a target kind: everything the rest of
// chart-upgrader knows of a kind, outside its adapter. Each adapter under
// internal/targets exports one Descriptor; the kind registry
// (internal/targets) lists them, and the spec parser, `plan --kind`, the
// CLI's help, the Lease, the backup Secrets and the docs' kind table read
// them from there. No other package spells a kind (docs/design.md §4.4).
//
// The package is pure: it imports neither client-go nor Helm, so the spec
// parser may use it.
package kind

import (
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// Descriptor is what chart-upgrader knows of one target kind outside its
// adapter.
type Descriptor struct {
	// Name is the kind in --target (KIND/NAMESPACE/NAME), `plan --kind`,
	// Events and the names of Leases and backups: lower case, as
	// "helmchart".
	Name string
	// Spelling is the kind in a spec's target.kind, as "HelmChart" (read
	// case-insensitively).
	Spelling string
	// APIVersion is the apiVersion of the target object, for Events.
	APIVersion string
	// Summary is one line for a person: what the target is.
	Summary string
	// Example is a --target of this kind, for help texts.
	Example string
	// OwnSource says the target object can name its chart source (a
	// HelmChart's spec.repo): a spec entry may then leave chart.source out.
	OwnSource bool
	// Options are the kind's own options in a spec entry; nil when it
	// takes none.
	Options *Options
	// Apply says which apply: settings (serverSide, forceConflicts) the
	// kind takes.
	Apply ApplySupport
	// Plan are the defaults of `plan --kind` for this kind.
	Plan PlanDefaults
	// HistoryBackup: the kind keeps no backup Secret; its Helm history is
	// its backup (a rollback goes back to a revision).
	HistoryBackup bool
	// Legacy: the kind's Lease and backup Secrets were named before kinds
	// were part of those names (the first kind, ManagedChart): its Lease
	// keeps the old name, and its backups written under the old name are
	// still found.
	Legacy bool
}

// Options is how a kind reads its own options: the spec entry's field
// Field, parsed by Parse with file:line errors; Default when the entry
// gives none. The value is the adapter's own type, handed back to it when
// the target is opened.
type Options struct {
	Field   string
	Summary string // what the options are, for the docs
	Default func() any
	Parse   func(f yamlfile.File, n *yaml.Node, field string) (any, error)
}

// PlanDefaults are the defaults of `chart-upgrader plan --kind KIND`: the
// names the example manifests of the kind use in Dir, and the nodes that
// kind's clusters run it on.
type PlanDefaults struct {
	Dir                                            string // the example manifests, as "plans/k3s/"
	Name, NodeSelector, SpecSecret, ServiceAccount string
}

// maxName is the longest object name Kubernetes takes.
const maxName = 253

// LeaseName is the coordination Lease of target name, in its namespace:
// chart-upgrader-<kind>-<name> (a Legacy kind: chart-upgrader-<name>), cut
// to a valid name.
func (d Descriptor) LeaseName(name string) string {
	n := "chart-upgrader-" + d.Name + "-" + name
	if d.Legacy {
		n = "chart-upgrader-" + name
	}
	return cut(n)
}

// BackupName is the Secret that holds target name as it was before an
// upgrade from fromVersion: chart-upgrader-backup-<kind>-<name>-<version>.
func (d Descriptor) BackupName(name, fromVersion string) string {
	return cut("chart-upgrader-backup-" + d.Name + "-" + name + "-" + Sanitize(fromVersion))
}

// LegacyBackupName is the name a Legacy kind's backups had before kinds
// were part of it; "" for other kinds.
func (d Descriptor) LegacyBackupName(name, fromVersion string) string {
	if !d.Legacy {
		return ""
	}
	return cut("chart-upgrader-backup-" + name + "-" + Sanitize(fromVersion))
}

// cut cuts a name to maxName, without a trailing '-' or '.'.
func cut(n string) string {
	if len(n) > maxName {
		n = n[:maxName]
	}
	return strings.TrimRight(n, "-.")
}

// Sanitize turns a version into what a name or label value may hold:
// lower case, anything but letters, digits, '-' and '.' as '-'.
func Sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Set is the registered kinds, in registry order.
type Set []Descriptor

// Lookup finds a kind by its Name or Spelling, case-insensitively.
func (s Set) Lookup(name string) (Descriptor, bool) {
	for _, d := range s {
		if strings.EqualFold(d.Name, name) || strings.EqualFold(d.Spelling, name) {
			return d, true
		}
	}
	return Descriptor{}, false
}

// Names lists the kinds' Names, in registry order.
func (s Set) Names() []string {
	out := make([]string, len(s))
	for i, d := range s {
		out[i] = d.Name
	}
	return out
}

// Spellings lists the kinds' Spellings, in registry order.
func (s Set) Spellings() []string {
	out := make([]string, len(s))
	for i, d := range s {
		out[i] = d.Spelling
	}
	return out
}

// OptionFields lists the spec fields of the kinds that take options.
func (s Set) OptionFields() []string {
	var out []string
	for _, d := range s {
		if d.Options != nil {
			out = append(out, d.Options.Field)
		}
	}
	return out
}

// OwnerOf is the kind whose options field is field.
func (s Set) OwnerOf(field string) (Descriptor, bool) {
	for _, d := range s {
		if d.Options != nil && d.Options.Field == field {
			return d, true
		}
	}
	return Descriptor{}, false
}

// Or joins words as "a, b or c".
func Or(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// OptionsOr is opts as the adapter's own options type T (what its
// Options.Parse or Options.Default gave), or def when none were given.
func OptionsOr[T any](opts any, def T) T {
	if o, ok := opts.(T); ok {
		return o
	}
	return def
}

// Apply is how a chart entry's upgrade is applied (the spec's apply:
// block): ServerSide is "auto" (keep the method the release recorded),
// "true" or "false"; ForceConflicts takes the fields other managers own
// (server-side apply's force); WarnUnchecked lets an object preflight
// could not see pass as a warning (unchecked: warn) instead of a
// refusal (unchecked: refuse, the default); Recreate (recreate:).
type Apply struct {
	ServerSide     string
	ForceConflicts bool
	WarnUnchecked  bool
	// Recreate are objects of the chart (Kind/name, or
	// Kind/namespace/name) the upgrade deletes, leaving their dependents
	// (orphan propagation: a workload's pods, a StatefulSet's claims),
	// and creates again when the API server would refuse to update them
	// (an immutable field).
	Recreate []string
	// CRDs is what the upgrade does with the chart's crds/: skip (""),
	// create or createReplace (CRDPolicies; package crds).
	CRDs string
	// MigrateCRDs: with createReplace, a stored version a new CRD drops
	// or stops serving is migrated first, not refused.
	MigrateCRDs bool
}

// CRDPolicies are the words of Apply.CRDs, the spec's apply.crds.
var CRDPolicies = []string{"skip", "create", "createReplace"}

// The values of Apply.ServerSide.
const (
	ServerSideAuto  = "auto"
	ServerSideTrue  = "true"
	ServerSideFalse = "false"
)

// DefaultApply is the apply of an entry that gives none.
var DefaultApply = Apply{ServerSide: ServerSideAuto}

// ServerSide says whether Helm applies server-side under setting (a
// serverSide value: auto, true, false; "" is auto), for a release that
// recorded the apply method recorded (Helm 4's apply_method, "ssa" or
// "csa"; a Helm 3 release records none: client-side), as Helm's upgrade
// decides it.
func ServerSide(setting, recorded string) bool {
	switch setting {
	case ServerSideTrue:
		return true
	case ServerSideFalse:
		return false
	}
	return recorded == "ssa"
}

// OrDefault is a with ServerSide auto when it gives none (the zero Apply:
// DefaultApply).
func (a Apply) OrDefault() Apply {
	if a.ServerSide == "" {
		a.ServerSide = ServerSideAuto
	}
	return a
}

// ApplySupport says which of the apply: settings a kind takes. A setting
// it refuses is bad input naming why (the reason is a sentence for a
// person). A kind that takes a setting only where the cluster allows it
// (a HelmChart CRD with the field) takes it here and checks it at preflight.
type ApplySupport struct {
	// ServerSideRefused: why serverSide other than auto is refused ("":
	// taken).
	ServerSideRefused string
	// ForceConflictsRefused: why forceConflicts: true is refused ("":
	// taken).
	ForceConflictsRefused string
}
