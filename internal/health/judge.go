package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Seen is what was read of one gate's objects.
type Seen struct {
	// Objects are the gate's objects as last read (each an object's JSON
	// map).
	Objects []map[string]any
	// Groups are the objects of the gate's Each, one group each.
	Groups []map[string]any
	// Missing names the rendered objects that do not exist (yet).
	Missing []string
	// Waiting says why the gate's objects are not known yet ("the
	// release's revision at 2.0.0 is not deployed yet"); "" when they are.
	Waiting string
}

// Vars are the upgrade's variables of every expression.
type Vars struct {
	Values  map[string]any // the merged values (U')
	Version string         // the target chart version
}

// State is a gate's or an object's state.
type State string

// The states.
const (
	Current    State = "current"
	InProgress State = "in progress"
	Failed     State = "failed"
)

// Verdict is one gate's judgement.
type Verdict struct {
	Gate  string `json:"gate"` // Gate.String
	State State  `json:"state"`
	// Objects counts the gate's objects read (those its filter keeps),
	// Current those current, LeftOut those its filter left out.
	Objects int `json:"objects"`
	Current int `json:"current"`
	LeftOut int `json:"leftOut,omitempty"`
	// BadExpr, when set, says the gate cannot be judged: an expression gave
	// a value of the wrong type (a bool's place, a group key's), or the
	// filter could not be evaluated on an object for another reason than a
	// field the object lacks (division by zero, no such overload): the spec
	// is wrong (exit 2).
	BadExpr string `json:"badExpression,omitempty"`
	// Why says what keeps the gate open or failed, one line each (the
	// object, the expression or rule, the fields it read); empty when
	// current.
	Why []string `json:"why,omitempty"`
}

// Line is the verdict in one line: "KubeVirt kubevirt.io/v1 (the
// release's): in progress, 0/1 current: KubeVirt ns/kv: ...".
func (v Verdict) Line() string {
	s := fmt.Sprintf("gate %s: %s, %d/%d current", v.Gate, v.State, v.Current, v.Objects)
	if v.LeftOut > 0 {
		s += fmt.Sprintf(" (%d left out by the filter)", v.LeftOut)
	}
	if v.BadExpr != "" {
		return s + ": " + v.BadExpr
	}
	if len(v.Why) > 0 {
		s += ": " + v.Why[0]
		if len(v.Why) > 1 {
			s += fmt.Sprintf(" (+%d more)", len(v.Why)-1)
		}
	}
	return s
}

// Judge judges gate g on what was read of its objects: those its filter
// keeps (the others left out, neither current nor counted: it is false of
// them, or they lack a field it reads). The gate is failed when one object
// is. Without Each it is current when at least MinCount objects exist,
// none is missing and each is current; with Each, when there is at least
// one group and every group has MinCount current objects (those whose key
// names it), whatever the others. Else it is in progress. An expression
// that gives a value of the wrong type, or a filter that cannot be
// evaluated on an object (filterError), sets BadExpr.
func Judge(g Gate, seen Seen, v Vars) Verdict {
	out := Verdict{Gate: g.String(), State: InProgress}
	if seen.Waiting != "" {
		out.Why = append(out.Why, seen.Waiting)
		return out
	}
	objs := append([]map[string]any(nil), seen.Objects...)
	sort.Slice(objs, func(i, j int) bool { return objectName(objs[i]) < objectName(objs[j]) })
	if g.Filter != nil {
		kept := objs[:0]
		for _, o := range objs {
			ok, err := g.Filter.eval(activation(o, v))
			if bad := badExpr(g, "filter", err); bad != "" {
				out.BadExpr = bad
				return out
			}
			if bad := filterError(g, o, err); bad != nil {
				out.BadExpr = bad.Error()
				return out
			}
			if err != nil || !ok {
				out.LeftOut++
				continue
			}
			kept = append(kept, o)
		}
		objs = kept
	}
	out.Objects = len(objs)
	var failed, open []string
	var current []map[string]any
	for _, o := range objs {
		state, why, err := judgeObject(g, o, v)
		if bad := badExpr(g, "", err); bad != "" {
			out.BadExpr = bad
			return out
		}
		switch state {
		case Current:
			out.Current++
			current = append(current, o)
		case Failed:
			failed = append(failed, why)
		default:
			open = append(open, why)
		}
	}
	if len(failed) > 0 {
		out.State, out.Why = Failed, failed
		return out
	}
	if g.Each != nil {
		if len(seen.Groups) == 0 {
			// no group is not "every group current": nothing was judged
			out.Why = []string{fmt.Sprintf("%s selects no object: no group to judge the gate in", g.Each)}
			return out
		}
		why, bad := groups(g, seen.Groups, current, v)
		if bad != "" {
			out.BadExpr = bad
			return out
		}
		if out.Why = why; len(why) == 0 {
			out.State = Current
		}
		return out
	}
	for _, m := range seen.Missing {
		out.Why = append(out.Why, m+" does not exist")
	}
	out.Why = append(out.Why, open...)
	if len(objs)+len(seen.Missing) < g.MinCount {
		out.Why = append(out.Why, fmt.Sprintf("%d %s exist, at least %d must", len(objs), plural(g.Kind, len(objs)), g.MinCount))
	}
	if len(out.Why) == 0 {
		out.State = Current
	}
	return out
}

// groups says which of g's groups lack MinCount current objects, one line
// each, or that the key gave a value that is not a string.
func groups(g Gate, groupObjs []map[string]any, current []map[string]any, v Vars) (why []string, bad string) {
	counts := map[string]int{}
	for _, o := range current {
		key, err := g.Each.Key.evalString(activation(o, v))
		if b := badExpr(g, "each.key", err); b != "" {
			return nil, b
		}
		if err == nil {
			counts[key]++
		}
	}
	names := make([]string, 0, len(groupObjs))
	for _, o := range groupObjs {
		names = append(names, (&unstructured.Unstructured{Object: o}).GetName())
	}
	sort.Strings(names)
	for _, n := range names {
		if c := counts[n]; c < g.MinCount {
			why = append(why, fmt.Sprintf("%s %s: %d current %s, %d needed", g.Each.Kind, n, c, plural(g.Kind, c), g.MinCount))
		}
	}
	return why, ""
}

// badExpr is the line of an expression that gave a value of the wrong
// type, "" for any other error.
func badExpr(g Gate, field string, err error) string {
	var nt *NotOfType
	if !errors.As(err, &nt) {
		return ""
	}
	if field != "" {
		return fmt.Sprintf("%s: %s: %v", g.At, field, nt)
	}
	return fmt.Sprintf("%s: %v", g.At, nt)
}

// filterError is the error of g's filter on object o, when err, the
// filter's, is none of nil, a field o lacks (which leaves o out) and a
// value of the wrong type (badExpr's): the gate cannot be judged; it names
// the gate, the expression, the object and CEL's message.
func filterError(g Gate, o map[string]any, err error) error {
	var nt *NotOfType
	if err == nil || lacking(err) || errors.As(err, &nt) {
		return nil
	}
	return fmt.Errorf("%s: filter: the expression %q cannot be evaluated on %s %s: %v", g.At, g.Filter.Source, g.Kind, objectName(o), err)
}

// judgeObject is one object's state, as Flux judges healthCheckExprs,
// and, unless current, one line saying why; err is an expression's value
// of the wrong type (*NotOfType).
func judgeObject(g Gate, o map[string]any, v Vars) (State, string, error) {
	name := g.Kind + " " + objectName(o)
	u := unstructured.Unstructured{Object: o}
	if og, found, _ := unstructured.NestedInt64(o, "status", "observedGeneration"); found && og < u.GetGeneration() {
		return InProgress, fmt.Sprintf("%s: status.observedGeneration %d is below metadata.generation %d: its status is from before the change",
			name, og, u.GetGeneration()), nil
	}
	act := activation(o, v)
	var nt *NotOfType
	if g.InProgress != nil {
		ok, err := g.InProgress.eval(act)
		if errors.As(err, &nt) {
			return InProgress, "", err
		}
		if ok {
			return InProgress, fmt.Sprintf("%s: in progress: %s%s", name, g.InProgress.Source, read(g.InProgress, o)), nil
		}
	}
	if g.Failed != nil {
		ok, err := g.Failed.eval(act)
		if errors.As(err, &nt) {
			return InProgress, "", err
		}
		if ok {
			return Failed, fmt.Sprintf("%s: failed: %s%s", name, g.Failed.Source, read(g.Failed, o)), nil
		}
	}
	ok, err := g.Current.eval(act)
	if errors.As(err, &nt) {
		return InProgress, "", err
	}
	if ok {
		return Current, "", nil
	}
	if err != nil {
		return InProgress, fmt.Sprintf("%s: not current: %s cannot be evaluated yet (%v)%s", name, g.Current.Source, err, read(g.Current, o)), nil
	}
	return InProgress, fmt.Sprintf("%s: not current: %s is false%s", name, g.Current.Source, read(g.Current, o)), nil
}

// Probe evaluates every expression of g on each object of seen (the
// objects as they are before the upgrade), as the wait will: a value of
// the wrong type, or a filter that cannot be evaluated on an object
// (filterError), is returned (the spec is wrong); any other outcome is
// none of its business.
func Probe(g Gate, seen Seen, v Vars) error {
	for _, o := range seen.Objects {
		act := activation(o, v)
		for _, e := range []*Expr{g.Filter, g.InProgress, g.Failed, g.Current} {
			if e == nil {
				continue
			}
			_, err := e.eval(act)
			if badExpr(g, "", err) != "" {
				return fmt.Errorf("%s: %w", g.At, err)
			}
			if e == g.Filter {
				if err := filterError(g, o, err); err != nil {
					return err
				}
			}
		}
		if g.Each != nil {
			if _, err := g.Each.Key.evalString(act); badExpr(g, "", err) != "" {
				return fmt.Errorf("%s: each.key: %w", g.At, err)
			}
		}
	}
	return nil
}

// activation binds the object's top-level fields (an absent one as an
// empty map, so that has() can test its fields) and the upgrade's
// variables.
func activation(o map[string]any, v Vars) map[string]any {
	act := map[string]any{VarVersion: v.Version, VarValues: v.Values}
	if v.Values == nil {
		act[VarValues] = map[string]any{}
	}
	for _, k := range objectVars {
		if m, ok := o[k]; ok && m != nil {
			act[k] = m
		} else {
			act[k] = map[string]any{}
		}
	}
	return act
}

// read says what the object holds at the fields e reads: " (status.phase
// = "Deploying", status.observedKubeVirtVersion absent)".
func read(e *Expr, o map[string]any) string {
	if len(e.reads) == 0 {
		return ""
	}
	parts := make([]string, 0, len(e.reads))
	for _, p := range e.reads {
		val, found, err := unstructured.NestedFieldNoCopy(o, strings.Split(p, ".")...)
		switch {
		case err != nil || !found:
			parts = append(parts, p+" absent")
		default:
			parts = append(parts, p+" = "+short(val))
		}
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// short is a value as JSON, cut to 80 characters.
func short(v any) string {
	b, err := json.Marshal(v)
	s := string(b)
	if err != nil {
		s = fmt.Sprint(v)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(o map[string]any) string {
	u := unstructured.Unstructured{Object: o}
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

func plural(kind string, n int) string {
	if n == 1 {
		return kind
	}
	return kind + "s"
}
