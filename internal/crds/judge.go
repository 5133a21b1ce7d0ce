package crds

import (
	"fmt"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Policy is the spec's apply.crds (kind.CRDPolicies): what an upgrade
// does with the chart's crds/.
type Policy string

const (
	// Skip leaves CRDs alone, as Helm's upgrade does (the default).
	Skip Policy = "skip"
	// Create creates the CRDs the cluster lacks and leaves the others.
	Create Policy = "create"
	// CreateReplace also updates each CRD that differs from the chart's.
	CreateReplace Policy = "createReplace"
)

// Action is what an upgrade does with one CRD.
type Action string

const (
	ActionCreate    Action = "create"    // the cluster lacks it: created
	ActionReplace   Action = "replace"   // it differs: updated
	ActionUnchanged Action = "unchanged" // the cluster's is the chart's
	ActionKept      Action = "kept"      // it differs; the policy leaves the cluster's
	ActionRefused   Action = "refused"   // the update would lose or hide objects, or the server refuses it
	ActionMigrate   Action = "migrate"   // updated after its objects are written back at the new storage version
)

// Live is what the cluster holds of one CRD of the chart, as read for the
// verdict.
type Live struct {
	// CRD is the cluster's; nil when there is none.
	CRD *apiextv1.CustomResourceDefinition
	// Unread: the process may not read the cluster's CRD; Refusal says
	// which rule to add.
	Unread bool
	// Differs: applying the chart's would change it (the dry-run apply's
	// result is not the cluster's).
	Differs bool
	// Refusal is the API server's refusal of the dry-run apply, in its
	// words ("": none).
	Refusal string
	// Objects are the CRD's objects, read when a version they may be
	// stored at would no longer be served (Unserving).
	Objects Objects
	// MissingService names the conversion webhook's Service
	// (namespace/name) when the cluster does not have it.
	MissingService string
	// Pruned are the fields objects hold that the new schema does not
	// declare (Client.pruned), at version PrunedAt.
	Pruned   Pruned
	PrunedAt string

	// was is the cluster's CRD as read (for the backup).
	was *unstructured.Unstructured
	// manager is the field manager to apply as (applyManager); handover
	// the installers whose client-side fields it takes first.
	manager  string
	handover []string
}

// Objects counts a CRD's objects and names the first few.
type Objects struct {
	Count int
	First []string
}

// String is "3 (a, b, c)" or "0".
func (o Objects) String() string {
	if o.Count == 0 {
		return "0"
	}
	more := ""
	if o.Count > len(o.First) {
		more = ", …"
	}
	return fmt.Sprintf("%d (%s%s)", o.Count, strings.Join(o.First, ", "), more)
}

// Pruned counts the objects holding fields a new schema does not declare,
// and names the first few with their fields.
type Pruned struct {
	Count int
	First []string // "Gadget ns/name: .spec.old, .spec.older"
}

// Decision is the verdict on one CRD.
type Decision struct {
	Name   string `json:"name"`
	From   string `json:"from"` // the chart's file
	Action Action `json:"action"`
	// Refused are the reasons to refuse, one line a person can act on
	// each (the CRD, what is wrong, the way out).
	Refused []string `json:"refused,omitempty"`
	// Note says why the action, for the report.
	Note string `json:"note,omitempty"`
	// Warnings are risks the apply goes ahead with: fields the new schema
	// no longer declares, which the API server drops.
	Warnings []string `json:"warnings,omitempty"`
	// Migrate are the stored versions whose objects the apply writes back
	// at the new storage version first (ActionMigrate).
	Migrate []string `json:"migrate,omitempty"`
	// Manager is the field manager the apply writes as; Handover the
	// installers whose client-side fields it takes over first.
	Manager  string   `json:"manager,omitempty"`
	Handover []string `json:"handover,omitempty"`

	// was is the cluster's CRD as read, for the backup.
	was *unstructured.Unstructured
}

// Unserving are the versions of live's status.storedVersions that live
// serves and c would keep without serving: objects may be stored at them,
// and no client could read them there any longer. The client counts the
// objects when there are any.
func Unserving(c CRD, live *apiextv1.CustomResourceDefinition) []string {
	if live == nil {
		return nil
	}
	var out []string
	for _, v := range live.Status.StoredVersions {
		was := version(live, v)
		now := version(c.Typed, v)
		if was != nil && was.Served && now != nil && !now.Served {
			out = append(out, v)
		}
	}
	return out
}

func version(c *apiextv1.CustomResourceDefinition, name string) *apiextv1.CustomResourceDefinitionVersion {
	for i := range c.Spec.Versions {
		if c.Spec.Versions[i].Name == name {
			return &c.Spec.Versions[i]
		}
	}
	return nil
}

// Judge is the verdict on applying c under p, the cluster holding l. It
// refuses, naming the CRD and the way out, what would lose or hide
// objects and what the API server refuses.
//
// With migrate (apply.crds {policy: createReplace, migrate: true}), a
// stored version the new CRD drops or no longer serves is no refusal: the
// verdict is migrate, and Client.Apply writes every object back at the
// new storage version and trims status.storedVersions before the update.
func Judge(p Policy, migrate bool, c CRD, l Live) Decision {
	d := Decision{Name: c.Name(), From: c.From}
	refuse := func(format string, args ...any) {
		d.Refused = append(d.Refused, fmt.Sprintf("CustomResourceDefinition %s (%s): ", d.Name, c.From)+fmt.Sprintf(format, args...))
	}
	switch {
	case l.Unread:
		refuse("%s", l.Refusal)
		d.Action = ActionRefused
		return d
	case l.CRD == nil:
		d.Action, d.Note = ActionCreate, "the cluster lacks it"
	case p != CreateReplace:
		d.Action, d.Note = ActionKept, fmt.Sprintf("it exists, and apply.crds: %s leaves the cluster's as it is (createReplace updates it)", p)
		return d
	case !l.Differs:
		d.Action, d.Note = ActionUnchanged, "the cluster's is the chart's"
		return d
	default:
		d.Action, d.Note = ActionReplace, "the chart's differs"
		if len(l.handover) > 0 {
			d.Note += fmt.Sprintf("; the fields %s wrote client-side when it installed the chart are handed over to %s first", strings.Join(l.handover, ", "), l.manager)
		}
		live, next := l.CRD, c.Typed
		if live.Spec.Scope != next.Spec.Scope {
			refuse("its scope would change from %s to %s, which the API server does not allow: delete the CRD and its objects first, or keep the scope", live.Spec.Scope, next.Spec.Scope)
		}
		if live.Spec.Names.Kind != next.Spec.Names.Kind {
			refuse("its kind would change from %s to %s: every client and stored object names the kind; keep it", live.Spec.Names.Kind, next.Spec.Names.Kind)
		}
		for _, v := range live.Status.StoredVersions {
			if version(next, v) == nil && migrate {
				d.Migrate = append(d.Migrate, v)
			} else if version(next, v) == nil {
				refuse("status.storedVersions holds %s, which the new CRD drops: objects may be stored at %s, and the API server refuses the update "+
					"(status.storedVersions[…] must appear in spec.versions); migrate the objects to %s and trim status.storedVersions first, or keep %s in spec.versions",
					v, v, storage(next), v)
			}
		}
		for _, v := range Unserving(c, live) {
			if migrate {
				d.Migrate = append(d.Migrate, v)
			} else if l.Objects.Count > 0 {
				refuse("version %s would no longer be served while %s objects exist and may be stored at it (status.storedVersions): "+
					"migrate them to %s and trim status.storedVersions first, or keep %s served", v, l.Objects, storage(next), v)
			}
		}
		if l.MissingService != "" {
			refuse("its conversion webhook calls the Service %s, which does not exist: every read of its objects at another version would fail; install the webhook first", l.MissingService)
		}
	}
	if l.Pruned.Count > 0 && (d.Action == ActionReplace) {
		more := ""
		if l.Pruned.Count > len(l.Pruned.First) {
			more = "; …"
		}
		d.Warnings = append(d.Warnings, fmt.Sprintf("CustomResourceDefinition %s (%s): its new schema at %s does not declare fields %d objects hold; "+
			"the API server drops them from each object when it is next written (a migration writes every one): %s%s",
			d.Name, c.From, l.PrunedAt, l.Pruned.Count, strings.Join(l.Pruned.First, "; "), more))
	}
	if l.Refusal != "" && len(d.Refused) == 0 {
		refuse("the API server refuses it (dry run): %s", l.Refusal)
	}
	switch {
	case len(d.Refused) > 0:
		d.Action = ActionRefused
	case len(d.Migrate) > 0:
		d.Action = ActionMigrate
		d.Note += fmt.Sprintf("; its objects stored at %s are written back at %s and status.storedVersions trimmed first",
			strings.Join(d.Migrate, ", "), storage(c.Typed))
	}
	return d
}

// storage is c's storage version's name.
func storage(c *apiextv1.CustomResourceDefinition) string {
	i := slices.IndexFunc(c.Spec.Versions, func(v apiextv1.CustomResourceDefinitionVersion) bool { return v.Storage })
	if i < 0 {
		return "the storage version"
	}
	return c.Spec.Versions[i].Name
}
