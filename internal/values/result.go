package values

import (
	"bytes"
	"encoding/json"
)

// Action is what a decision did to one path of the new user values.
type Action string

// The actions, as reported.
const (
	ActionKeep     Action = "keep"     // the user's value is carried over
	ActionDrop     Action = "drop"     // the user's value is dropped; the new default applies
	ActionPin      Action = "pin"      // the old default is written, so the effective value does not change
	ActionSet      Action = "set"      // a value computed from a live object is written
	ActionRemove   Action = "remove"   // the user's value is removed by a remove rule
	ActionDefault  Action = "default"  // no value is written; the chart default applies
	ActionOverride Action = "override" // an explicit --set or -f value is written
	ActionAdopt    Action = "adopt"    // the live value of a field an operator changed is written
)

// WarningKind classifies a warning (docs/design.md §5.7).
type WarningKind string

// The warning kinds.
const (
	WarnShadowedDefault WarningKind = "shadowed-default"
	WarnOrphan          WarningKind = "orphan"
	WarnNoOldChart      WarningKind = "no-old-chart"
	WarnLiveMissing     WarningKind = "live-missing"
	WarnRegeneratedData WarningKind = "regenerated-data"
	WarnPinned          WarningKind = "pinned"
	// WarnDriftOwned: an object of the chart was changed in the cluster
	// (Fleet: Modified), and a live rule reads it, so this upgrade writes
	// the live value and the drift ends.
	WarnDriftOwned WarningKind = "drift-owned-by-live-rule"
	// WarnTarget: the target's own settings put the upgrade at a risk the
	// operator chose to keep (a HelmChart whose failure policy uninstalls
	// the chart when an upgrade fails); the path names the setting.
	WarnTarget WarningKind = "target"
	// WarnFieldOwner: another field manager set a field of an object the
	// upgrade writes, and the upgrade overwrites it (a client-side apply,
	// or a server-side one that forces conflicts); the path names the
	// object and field.
	WarnFieldOwner WarningKind = "field-owned-by-another-manager"
	// WarnTakeOwnership: an object the new chart adds exists already
	// without the release's ownership metadata, and the applier takes it
	// over (Fleet's agent does); the path names the object.
	WarnTakeOwnership WarningKind = "takes-ownership"
	// WarnNotChecked: an object of the chart that exists, or may, could
	// not be checked for field-manager conflicts; the message says why
	// (the RBAC rule to add, or the schema the cluster does not publish).
	WarnNotChecked WarningKind = "conflict-not-checked"
	// WarnRecreate: an object the API server would refuse to update (an
	// immutable field) that the spec's apply.recreate lists: the upgrade
	// deletes it, leaving its dependents, and creates it again; the path
	// names the object.
	WarnRecreate WarningKind = "recreate"
	// WarnCRDPrune: a CRD of the chart that the upgrade replaces no longer
	// declares fields objects of it hold; the API server drops them on the
	// next write of each. The path names the CRD.
	WarnCRDPrune WarningKind = "crd-prunes-fields"
	// WarnAdopt: an adopt rule could not adopt (it matches no value of
	// the new chart; live fields disagree on its value); the path names
	// the rule's pattern or the value.
	WarnAdopt WarningKind = "adopt"
	// WarnMapAPI: an object of the deployed revision's stored manifest is
	// at a version the cluster no longer serves, and the upgrade maps it
	// to the one that replaces it first (release.mapRemovedAPIs); the
	// path names the object.
	WarnMapAPI WarningKind = "maps-removed-api"
)

// Value is an optional value: Set false means "not set", which differs from
// a YAML null (Set true, V nil). Unset values are left out of JSON.
type Value struct {
	V   any
	Set bool
}

func some(v any) Value { return Value{V: v, Set: true} }

// IsZero reports an unset value (for the json omitzero option).
func (v Value) IsZero() bool { return !v.Set }

// MarshalJSON encodes the value itself; null for a YAML null. Characters
// such as < and > are written as they are.
func (v Value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.V); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Decision is one line of the report: how one path was decided.
type Decision struct {
	Path   string `json:"path"`
	Policy Policy `json:"policy"`
	// Rule is the 1-based index of the deciding rule in its file; 0 means no
	// rule matched and the default policy (user) decided.
	Rule   int    `json:"rule"`
	Old    Value  `json:"old,omitzero"`
	New    Value  `json:"new,omitzero"`
	User   Value  `json:"user,omitzero"`
	Result Value  `json:"result,omitzero"`
	Action Action `json:"action"`
	Reason string `json:"reason"`
	// Secret marks values that reports must redact.
	Secret bool `json:"-"`
}

// Warning is something a person should look at; Path is a values path, or
// a template file for regenerated-data.
type Warning struct {
	Kind    WarningKind `json:"kind"`
	Path    string      `json:"path"`
	Message string      `json:"message"`
}

// Result is the outcome of a merge.
type Result struct {
	From      string         `json:"from"`
	To        string         `json:"to"`
	Values    map[string]any `json:"values"`
	SHA256    string         `json:"sha256"`
	Decisions []Decision     `json:"decisions"`
	Warnings  []Warning      `json:"warnings"`
	// YAML is the canonical encoding of Values; SHA256 is its hash.
	YAML []byte `json:"-"`
}

// Redacted returns a copy whose decisions show no secret value; Values is
// shared, not copied: `merge` prints the values it makes, secrets
// included, as its product. Reports are printed from the redacted copy.
func (r *Result) Redacted() *Result {
	out := *r
	out.Decisions = make([]Decision, len(r.Decisions))
	for i, d := range r.Decisions {
		if d.Secret {
			d.Old, d.New, d.User, d.Result = redact(d.Old), redact(d.New), redact(d.User), redact(d.Result)
		}
		out.Decisions[i] = d
	}
	return &out
}

// RedactedValues is Redacted with each value a secret decision decides
// also Redaction in a copy of Values: for a report whose values are not
// the product (preflight -o json, which a Plan's Job prints to its log).
// YAML is left as it is.
func (r *Result) RedactedValues() *Result {
	out := r.Redacted()
	copied := false
	for _, d := range r.Decisions {
		if !d.Secret {
			continue
		}
		p, err := ParsePattern(d.Path)
		if err != nil || p.Keys() == nil {
			continue
		}
		if _, ok := lookup(out.Values, p.Keys()); ok {
			if !copied {
				out.Values, copied = DeepCopy(r.Values).(map[string]any), true
			}
			setPath(out.Values, p.Keys(), Redaction)
		}
	}
	return out
}

// Redaction is what reports show instead of a secret value.
const Redaction = "<redacted>"

func redact(v Value) Value {
	if !v.Set {
		return v
	}
	return some(Redaction)
}
