package provenance

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Reading is a field read back in values terms: the values it is made of
// (or why none), and what makes the chart render its live value.
type Reading struct {
	Source
	// Set are the Helm flags that make the chart render the live value
	// (--set-string for a string, --set-json for a list, --set else); a
	// Secret's values are redacted. None when the chart renders it
	// already.
	Set []string `json:"set,omitempty"`
	// Rules are the spec rules that keep the live value across the
	// upgrade: adopt, on each value to change.
	Rules []string `json:"rules,omitempty"`
	// Adopt is what an adopt rule on each of those values writes.
	Adopt []Adopted `json:"-"`
	// AlsoChanges are the other fields of the chart's objects that the
	// same change of values changes (Map.CheckWith): keeping the live
	// value changes them too.
	AlsoChanges []string `json:"alsoChanges,omitempty"`
}

// Adopted is the value a rule path takes so that the chart renders the
// live field: Keys are the path (Unit), Value the whole value there.
type Adopted struct {
	Keys  []string
	Value any
}

// Adoptable reports whether values render the field and the live value
// can be written back to them.
func (r Reading) Adoptable() bool { return r.Mapped() }

// Redacted stands for a Secret's value: the one token of every report
// (values.Redaction).
const Redacted = values.Redaction

// Read explains the field (Explain) and says how to make the chart
// render the live value; secret gives no flag (a flag with the value
// redacted would render the redaction): the adopt rule alone, which takes
// the value from the cluster.
func (m *Map) Read(id ObjectID, steps []Step, live any, liveSet, secret bool) Reading {
	src := m.Explain(id, steps, live, liveSet)
	probed := "" // why conditional probing may have missed it
	if !src.Mapped() && liveSet && m.render != nil {
		// no marker reached the field: a value that renders it may still
		// be found by rendering (probe.go)
		for _, p := range m.probes(id, steps, live) {
			found := Source{Assignments: []Assignment{m.assign(p.at, p.value, true)}, Note: ProbeNote}
			if r := m.reading(found, id, steps, live, secret); r.Mapped() {
				return r
			}
		}
		// nor does it render the live value as the conditions go now: a
		// value they test may make it (condition.go)
		r, ok, cut := m.readByCondition(id, steps, live, secret)
		if ok {
			return r
		}
		probed = cut
	}
	if !liveSet {
		return Reading{Source: src}
	}
	r := m.reading(src, id, steps, live, secret)
	if !r.Mapped() && r.Reason == ReasonRendersOther {
		// the text split along the template's literal text renders
		// something else: read as a YAML document, it may not
		if doc, ok := m.documentAt(id, steps, live); ok {
			if d := m.reading(doc, id, steps, live, secret); d.Mapped() {
				return d
			}
		}
	}
	switch {
	case r.Mapped():
	case m.budgetSpent:
		r.Reason += "; " + ReasonBudget
	case probed != "":
		r.Reason += "; " + probed
	}
	return r
}

// reading is src (the values a field is made of) as a Reading: the
// adopt rules and flags that make the chart render live, checked by
// rendering them (CheckWith).
func (m *Map) reading(src Source, id ObjectID, steps []Step, live any, secret bool) Reading {
	r := Reading{Source: src}
	if !r.Mapped() {
		return r
	}
	byUnit := map[string]int{} // index in r.Adopt
	for _, a := range r.Assignments {
		if !a.Changed {
			continue
		}
		unit := Unit(a.At)
		path := PathString(StepsOf(unit))
		if i, ok := byUnit[path]; ok {
			// two elements of one list: one list with both replaced
			r.Adopt[i].Value = setIn(r.Adopt[i].Value, a.At[len(unit):], a.Value)
			r.Set[i] = SetFlag(unit, r.Adopt[i].Value, secret)
			continue
		}
		byUnit[path] = len(r.Adopt)
		v := UnitValue(m.values, a.At, a.Value)
		r.Adopt = append(r.Adopt, Adopted{Keys: unit, Value: v})
		r.Set = append(r.Set, SetFlag(unit, v, secret))
		r.Rules = append(r.Rules, AdoptRule(unit))
	}
	if secret {
		r.Set = nil
		if flag, ok := secretSetFile(r, id, steps, live); ok {
			r.Set = []string{flag}
		}
	}
	if len(r.Adopt) == 0 {
		// no value changes: the chart must render the live value as it is
		if t := m.find(id); t != nil {
			if rv, ok := At(t.real, steps); ok && !renders(rv, live) {
				return Reading{Source: Source{Reason: ReasonRendersOther}}
			}
		}
	}
	if m.render != nil && len(r.Adopt) > 0 {
		ok, also, err := m.check(r, id, steps, live)
		switch {
		case err != nil:
			// the error is not shown: it may quote the value, a secret
			return Reading{Source: Source{Reason: "setting the value it was read back to does not render (the chart refuses it), so it cannot be kept by a value"}}
		case !ok:
			return Reading{Source: Source{Reason: ReasonRendersOther}}
		}
		r.AlsoChanges = also
	}
	return r
}

// secretSetFile is the flag that gives a Secret's value to Helm from the
// live Secret, never on the command line: --set-file with kubectl reading
// the key and base64 decoding it, when the one value changed is the
// whole decoded key (b64enc of the value).
func secretSetFile(r Reading, id ObjectID, steps []Step, live any) (string, bool) {
	if id.Kind != "Secret" || len(steps) != 2 || steps[0] != Step("data") || len(r.Adopt) != 1 {
		return "", false
	}
	key, _ := steps[1].(string)
	lv, _ := live.(string)
	decoded, ok := decodeB64(lv)
	if !ok || key == "" {
		return "", false
	}
	if v, isText := r.Adopt[0].Value.(string); !isText || v != string(decoded) {
		return "", false
	}
	ns := ""
	if id.Namespace != "" {
		ns = " -n " + id.Namespace
	}
	return fmt.Sprintf("--set-file %s=<(kubectl get secret%s %s -o jsonpath='{.data.%s}' | base64 -d)",
		setKey(r.Adopt[0].Keys), ns, id.Name, strings.ReplaceAll(key, ".", `\.`)), true
}

// AdoptRule is the spec rule, in YAML flow style, that adopts the value
// at keys: the path plain when it is letters, digits, dots, dashes and
// underscores, else single-quoted.
func AdoptRule(keys []string) string {
	path := PathString(StepsOf(keys))
	if !plainPath.MatchString(path) {
		path = "'" + strings.ReplaceAll(path, "'", "''") + "'"
	}
	return fmt.Sprintf("{path: %s, policy: adopt}", path)
}

var plainPath = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// StepsOf are the steps of a path of map keys (Marks.Units, Adopted.Keys).
func StepsOf(keys []string) []Step {
	out := make([]Step, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out
}

// SetFlag is the Helm flag that sets the value at keys to v, in the
// syntax of Helm's strvals: keys joined by dots (a dot, comma, equals
// sign or backslash in a key escaped), a string value with --set-string
// (its commas and backslashes escaped, and a leading brace, which strvals
// would read as a list), a list, map or null with
// --set-json, a number or boolean with --set. secret gives "": no flag
// shows a secret, and none with its value redacted, which would render
// the redaction (a number then breaks the render).
func SetFlag(keys []string, v any, secret bool) string {
	key := setKey(keys)
	if secret {
		return ""
	}
	switch t := v.(type) {
	case string:
		val := strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(t)
		if strings.HasPrefix(val, "{") {
			val = `\` + val // strvals reads a value that starts with { as a list
		}
		return fmt.Sprintf("--set-string %s=%s", key, val)
	case map[string]any, []any, nil:
		b, _ := json.Marshal(t)
		return fmt.Sprintf("--set-json %s=%s", key, b)
	}
	return fmt.Sprintf("--set %s=%v", key, v)
}

// setKey is a path of keys as strvals reads it: joined by dots, a dot,
// comma, equals sign, bracket or backslash in a key escaped.
func setKey(keys []string) string {
	esc := strings.NewReplacer(`\`, `\\`, `.`, `\.`, `,`, `\,`, `=`, `\=`, `[`, `\[`)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = esc.Replace(k)
	}
	return strings.Join(parts, ".")
}

// Says is the reading in one clause for a conflict line: which values
// render the field, and how to keep the live value (or why it cannot be
// adopted).
func (r Reading) Says() string {
	if !r.Mapped() {
		return "not adoptable: " + r.Reason
	}
	s := "set by the value " + r.Paths()
	switch {
	case len(r.Rules) == 0:
		return s
	case len(r.Set) == 0:
		s = fmt.Sprintf("%s; to keep the live value, adopt it with the spec rule %s (a secret: adopt takes it from the cluster, and no flag shows it)",
			s, strings.Join(r.Rules, " and "))
	case strings.HasPrefix(r.Set[0], "--set-file "):
		s = fmt.Sprintf("%s; to keep the live value, adopt it with the spec rule %s (a secret: adopt takes it from the cluster), or give %s, which reads it from the live Secret",
			s, strings.Join(r.Rules, " and "), strings.Join(r.Set, " "))
	default:
		s = fmt.Sprintf("%s; to keep the live value, adopt it with the spec rule %s, or give %s",
			s, strings.Join(r.Rules, " and "), strings.Join(r.Set, " "))
	}
	if len(r.AlsoChanges) > 0 {
		s += "; that also changes " + strings.Join(r.AlsoChanges, ", ")
	}
	return s
}
