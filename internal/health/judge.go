package health

import (
	"encoding/json"
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
	// Objects counts the gate's objects read, Current those current.
	Objects int `json:"objects"`
	Current int `json:"current"`
	// Why says what keeps the gate open or failed, one line each (the
	// object, the expression or rule, the fields it read); empty when
	// current.
	Why []string `json:"why,omitempty"`
}

// Line is the verdict in one line: "KubeVirt kubevirt.io/v1 (the
// release's): in progress, 0/1 current: KubeVirt ns/kv: ...".
func (v Verdict) Line() string {
	s := fmt.Sprintf("gate %s: %s, %d/%d current", v.Gate, v.State, v.Current, v.Objects)
	if len(v.Why) > 0 {
		s += ": " + v.Why[0]
		if len(v.Why) > 1 {
			s += fmt.Sprintf(" (+%d more)", len(v.Why)-1)
		}
	}
	return s
}

// Judge judges gate g on what was read of its objects. The gate is failed
// when one object is; current when at least MinCount objects exist, none
// is missing and each is current; else in progress.
func Judge(g Gate, seen Seen, v Vars) Verdict {
	out := Verdict{Gate: g.String(), State: InProgress, Objects: len(seen.Objects)}
	if seen.Waiting != "" {
		out.Why = append(out.Why, seen.Waiting)
		return out
	}
	objs := append([]map[string]any(nil), seen.Objects...)
	sort.Slice(objs, func(i, j int) bool { return objectName(objs[i]) < objectName(objs[j]) })
	var failed, open []string
	for _, o := range objs {
		state, why := judgeObject(g, o, v)
		switch state {
		case Current:
			out.Current++
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

// judgeObject is one object's state, as Flux judges healthCheckExprs,
// and, unless current, one line saying why.
func judgeObject(g Gate, o map[string]any, v Vars) (State, string) {
	name := g.Kind + " " + objectName(o)
	u := unstructured.Unstructured{Object: o}
	if og, found, _ := unstructured.NestedInt64(o, "status", "observedGeneration"); found && og < u.GetGeneration() {
		return InProgress, fmt.Sprintf("%s: status.observedGeneration %d is below metadata.generation %d: its status is from before the change",
			name, og, u.GetGeneration())
	}
	act := activation(o, v)
	if g.InProgress != nil {
		if ok, _ := g.InProgress.eval(act); ok {
			return InProgress, fmt.Sprintf("%s: in progress: %s%s", name, g.InProgress.Source, read(g.InProgress, o))
		}
	}
	if g.Failed != nil {
		if ok, _ := g.Failed.eval(act); ok {
			return Failed, fmt.Sprintf("%s: failed: %s%s", name, g.Failed.Source, read(g.Failed, o))
		}
	}
	ok, err := g.Current.eval(act)
	if ok {
		return Current, ""
	}
	if err != nil {
		return InProgress, fmt.Sprintf("%s: not current: %s cannot be evaluated yet (%v)%s", name, g.Current.Source, err, read(g.Current, o))
	}
	return InProgress, fmt.Sprintf("%s: not current: %s is false%s", name, g.Current.Source, read(g.Current, o))
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
