package values

import (
	"fmt"
	"strings"
)

// leaf decides one path: the rule's policy on the migrated user value, then
// the overrides, then the readonly checks; it records the decision when the
// path is worth one.
func (m *merger) leaf(vals [nTrees]node, states ruleState, decided int, liveHere bool, at cursor) {
	u0, u, over := vals[tUser0], vals[tUser], vals[tOver]
	old, nw := vals[tOld], vals[tNew]
	if !m.hasOld {
		old = node{}
	}

	d := Decision{Path: at.path, Policy: PolicyUser, Old: old.value(), New: nw.value(), User: u0.value()}
	var rule *Rule
	if decided >= 0 {
		rule = &m.in.Rules[decided]
		d.Policy, d.Rule = rule.Policy, decided+1
		m.ruleUsed[decided] = true
	}
	d.Secret = at.secret || holdsSecret(u0.v) || holdsSecret(nw.v) || holdsSecret(over.v) ||
		(rule != nil && rule.Source != nil && rule.Source.IsSecret())

	// the policy, on the user value after migrations
	var result node
	if liveHere {
		result = m.decideLive(&d, decided, u)
	} else {
		result = m.decidePolicy(&d, u, old, nw)
	}

	migrated := !sameNode(u0, u)
	if migrated {
		d.Reason = fmt.Sprintf("migration %s changed the user value (%s → %s); %s",
			strings.Join(m.migrationsAt(), ", "), showNode(u0, d.Secret), showNode(u, d.Secret), d.Reason)
	}

	if over.set {
		prior := d.Action
		result = over
		d.Action = ActionOverride
		d.Reason = fmt.Sprintf("explicit %s (the %s policy gave: %s)", m.overrideOrigin(m.keys), d.Policy, prior)
	}

	if d.Policy == PolicyReadonly {
		m.checkReadonly(&d, u0, old, nw, result, migrated, over.set)
	}
	if len(states) > 0 && (isMap(u0) || isMap(old) || isMap(nw) || isMap(result)) {
		m.checkReadonlyBelow(&d, states, u0, old, nw, result, migrated, over.set)
	}

	d.Result = result.value()
	if result.set {
		setPath(m.result, m.keys, DeepCopy(result.v))
	}

	if d.Action == ActionKeep && (d.Policy == PolicyUser || d.Policy == PolicyFollow) &&
		m.hasOld && nw.set && !sameNode(old, nw) && !equal(result.v, nw.v) {
		m.warn(WarnShadowedDefault, d.Path, fmt.Sprintf("user value %s hides new default %s (old default %s)",
			showNode(result, d.Secret), showNode(nw, d.Secret), showNode(old, d.Secret)))
	}
	if d.Action == ActionPin {
		m.warn(WarnPinned, d.Path, fmt.Sprintf("old default %s pinned; the new chart's %s is not applied",
			showNode(old, d.Secret), describeNew(nw, d.Secret)))
	}

	interesting := u0.set || u.set || over.set || result.set || liveHere || migrated ||
		(m.hasOld && !sameNode(old, nw))
	if interesting {
		m.decisions = append(m.decisions, d)
	}
}

func describeNew(nw node, secret bool) string {
	if !nw.set {
		return "removal of the key"
	}
	return "default " + showNode(nw, secret)
}

func showNode(n node, secret bool) string {
	if !n.set {
		return "(unset)"
	}
	return show(n.v, secret)
}

// decidePolicy applies every policy but live and once.
func (m *merger) decidePolicy(d *Decision, u, old, nw node) node {
	changed := m.hasOld && !sameNode(old, nw)
	noUser := func() node {
		d.Action = ActionDefault
		switch {
		case changed && nw.set:
			d.Reason = "no user value: the new default applies"
		case changed:
			d.Reason = "no user value; the new chart drops this default"
		default:
			d.Reason = "no user value"
		}
		return node{}
	}
	keep := func(reason string) node {
		d.Action, d.Reason = ActionKeep, reason
		return u
	}
	drop := func(reason string) node {
		d.Action, d.Reason = ActionDrop, reason
		return node{}
	}

	switch d.Policy {
	case PolicyAdopt:
		if v, ok := m.decideAdopt(d, u); ok {
			return v
		}
		if u.set {
			return keep("user value kept (no live change to adopt)")
		}
		return noUser()
	case PolicyUser:
		if u.set {
			return keep("user value kept")
		}
		return noUser()
	case PolicyChart:
		if u.set {
			return drop("user value dropped: the chart's default applies")
		}
		return noUser()
	case PolicyFollow:
		switch {
		case !u.set:
			return noUser()
		case !m.hasOld:
			return keep("no old chart to compare with: user value kept")
		case old.set && equal(u.v, old.v):
			return drop("user value equals the old default: dropped so the new default applies")
		default:
			return keep("user value differs from the old default: kept as a customisation")
		}
	case PolicyKeep, PolicyReadonly:
		switch {
		case u.set:
			return keep("user value kept")
		case changed && old.set:
			d.Action, d.Reason = ActionPin, "the new chart changes this default: old default pinned"
			return old
		case !m.hasOld:
			d.Action, d.Reason = ActionDefault, "no user value and no old chart to pin from"
			return node{}
		default:
			return noUser()
		}
	case PolicyMax, PolicyMin:
		return m.decideBound(d, u, nw, keep, drop, noUser)
	case PolicyRemove:
		if u.set {
			d.Action, d.Reason = ActionRemove, "user value removed by a remove rule"
			return node{}
		}
		return noUser()
	case PolicyLive, PolicyOnce:
		// a live rule matched an ancestor of a path below its own: the rule
		// decides its path as a whole, this leaf is under it
		d.Action, d.Reason = ActionDefault, "under a "+string(d.Policy)+" path"
		return node{}
	}
	return noUser()
}

func (m *merger) decideBound(d *Decision, u, nw node, keep, drop func(string) node, noUser func() node) node {
	if !u.set {
		return noUser()
	}
	if !nw.set {
		return keep("no new default to compare with: user value kept")
	}
	c, ok := compareValues(u.v, nw.v)
	if !ok {
		return keep("user value and new default are not comparable numbers or quantities: user value kept")
	}
	uv, nv := show(u.v, d.Secret), show(nw.v, d.Secret)
	if d.Policy == PolicyMax {
		if c >= 0 {
			return keep(fmt.Sprintf("user value %s ≥ new default %s: kept", uv, nv))
		}
		return drop(fmt.Sprintf("user value %s < new default %s: dropped so the larger new default applies", uv, nv))
	}
	if c <= 0 {
		return keep(fmt.Sprintf("user value %s ≤ new default %s: kept", uv, nv))
	}
	return drop(fmt.Sprintf("user value %s > new default %s: dropped so the smaller new default applies", uv, nv))
}

// decideLive applies a live or once rule at its own path.
func (m *merger) decideLive(d *Decision, decided int, u node) node {
	r := &m.in.Rules[decided]
	lv := m.live[decided]
	if lv.value.Set && r.Unless != nil && equal(lv.value.V, r.Unless.Equals) {
		was := fmt.Sprintf("live %s is %s, the value unless replaces", r.Source, show(lv.value.V, d.Secret))
		switch {
		case u.set:
			d.Action, d.Reason = ActionKeep, was+", but the user values set it: user value kept"
			return u
		case r.Unless.ThenDefault:
			d.Action, d.Reason = ActionDefault, was+": the new chart's default applies (unless.thenDefault)"
			return node{}
		}
		d.Action, d.Reason = ActionSet, fmt.Sprintf("%s: set to %s (unless.then)", was, show(r.Unless.Then, d.Secret))
		return node{r.Unless.Then, true}
	}
	if lv.value.Set {
		d.Action = ActionSet
		if r.Policy == PolicyOnce {
			d.Reason = fmt.Sprintf("generated once: pinned from live %s", r.Source)
		} else {
			d.Reason = fmt.Sprintf("derived from live %s", r.Source)
		}
		return node{lv.value.V, true}
	}
	if r.Policy == PolicyOnce {
		m.warn(WarnLiveMissing, d.Path, lv.missing+": the chart will generate a new value")
		if u.set {
			d.Action, d.Reason = ActionKeep, lv.missing+": user value kept"
			return u
		}
		d.Action, d.Reason = ActionDefault, lv.missing+": left unset so the chart generates it"
		return node{}
	}
	m.warn(WarnLiveMissing, d.Path, lv.missing+": fell back to the user value")
	if u.set {
		d.Action, d.Reason = ActionKeep, lv.missing+": user value kept"
		return u
	}
	d.Action, d.Reason = ActionDefault, lv.missing+": no user value, the chart default applies"
	return node{}
}

// checkReadonly refuses when a migration or an override changes the value
// Helm renders with, compared with what keep gives without them.
func (m *merger) checkReadonly(d *Decision, u0, old, nw, result node, migrated, overridden bool) {
	if !migrated && !overridden {
		return
	}
	var baseline node
	switch {
	case u0.set:
		baseline = u0
	case m.hasOld && old.set && !sameNode(old, nw):
		baseline = old
	default:
		baseline = nw
	}
	final := result
	if !final.set {
		final = nw
	}
	if sameNode(effectiveNode(baseline), effectiveNode(final)) {
		return
	}
	by := "migration " + strings.Join(m.migrationsAt(), ", ")
	if overridden {
		by = m.overrideOrigin(m.keys)
	}
	m.refusals = append(m.refusals, fmt.Sprintf("%s (rule %d) would change from %s to %s by %s",
		d.Path, d.Rule, showNode(effectiveNode(baseline), d.Secret), showNode(effectiveNode(final), d.Secret), by))
	d.Reason = "REFUSED: readonly value would change; " + d.Reason
}

// checkReadonlyBelow checks the readonly paths below a leaf whose subtree
// is decided as a whole, because some tree holds a non-map here (a
// migration, an override or the new chart replaced a map): the readonly
// values under it must keep their effective value all the same.
func (m *merger) checkReadonlyBelow(d *Decision, states ruleState, u0, old, nw, result node, migrated, overridden bool) {
	readonly := false
	for i := range states {
		if m.in.Rules[i].Policy == PolicyReadonly {
			readonly = true
		}
	}
	if !readonly {
		return
	}
	cause := "the new chart's change of " + d.Path
	switch {
	case overridden:
		cause = m.overrideOrigin(m.keys)
	case migrated:
		cause = "migration " + strings.Join(m.migrationsAt(), ", ")
	}
	base := effSide{u: u0}
	fin := effSide{u: result}
	oldDef := old
	if !m.hasOld {
		oldDef = nw
	}
	var walk func(sub []string, st ruleState, base, fin effSide, old, nw node)
	walk = func(sub []string, st ruleState, base, fin effSide, old, nw node) {
		keys := sortedKeys(asMap(base.u), asMap(old), asMap(nw))
		for _, k := range keys {
			path := append(append([]string(nil), sub...), k)
			b, f := base.descend(k), fin.descend(k)
			o, n := child(old, k), child(nw, k)
			next := make(ruleState, len(st))
			decided := -1
			for i := range st {
				r := &m.in.Rules[i]
				next[i] = r.Pattern.step(st[i], k)
				if next[i]&r.Pattern.accept() != 0 {
					decided = i
					break
				}
			}
			if decided >= 0 {
				if m.in.Rules[decided].Policy != PolicyReadonly {
					continue
				}
				def := o // keep pins the old default; a key new in the chart comes from the new one
				if !o.set {
					def = n
				}
				was, now := effectiveNode(b.value(def)), effectiveNode(f.value(n))
				if !sameNode(was, now) {
					full := FormatPath(append(append([]string(nil), m.keys...), path...))
					m.refusals = append(m.refusals, fmt.Sprintf("%s (rule %d) would change from %s to %s by %s",
						full, decided+1, showNode(was, d.Secret), showNode(now, d.Secret), cause))
					d.Reason = "REFUSED: a readonly value below would change; " + d.Reason
				}
				continue
			}
			walk(path, next[:len(st)], b, f, o, n)
		}
	}
	walk(nil, states, base, fin, oldDef, nw)
}

// effSide follows one side's user values down a path: cut once a non-map
// user value replaced an ancestor (nothing below it renders).
type effSide struct {
	u   node
	cut bool
}

func (e effSide) descend(k string) effSide {
	if e.cut {
		return e
	}
	if !e.u.set {
		return effSide{}
	}
	if mm, ok := e.u.v.(map[string]any); ok {
		v, set := mm[k]
		return effSide{u: node{v, set}}
	}
	return effSide{cut: true}
}

// value is what renders at this path with default d.
func (e effSide) value(d node) node {
	if e.cut {
		return node{}
	}
	v, ok := coalesce(e.u.v, e.u.set, d.v, d.set)
	return node{v, ok}
}

func child(n node, k string) node {
	if mm, ok := n.v.(map[string]any); ok && n.set {
		v, set := mm[k]
		return node{v, set}
	}
	return node{}
}

func asMap(n node) map[string]any {
	if mm, ok := n.v.(map[string]any); ok && n.set {
		return mm
	}
	return nil
}

// effectiveNode: a null user value deletes the default, so renders unset.
func effectiveNode(n node) node {
	if n.set && n.v == nil {
		return node{}
	}
	return n
}

// migrationsAt names the migrations that changed the current path.
func (m *merger) migrationsAt() []string {
	var names []string
	for i := 1; i < len(m.steps); i++ {
		a, aok := lookup(m.steps[i-1], m.keys)
		b, bok := lookup(m.steps[i], m.keys)
		if !sameNode(node{a, aok}, node{b, bok}) {
			names = append(names, m.stepNames[i-1])
		}
	}
	if len(names) == 0 {
		// the change happened above this path (an ancestor replaced)
		names = append(names, m.stepNames...)
	}
	return names
}

// noOldChartWarnings: follow, keep and readonly need the old chart.
func (m *merger) noOldChartWarnings() {
	if m.hasOld {
		return
	}
	for i, r := range m.in.Rules {
		if !m.ruleUsed[i] {
			continue
		}
		switch r.Policy {
		case PolicyFollow:
			m.warn(WarnNoOldChart, r.Pattern.String(), fmt.Sprintf("rule %d (follow) has no old chart to compare with: it behaves as user", i+1))
		case PolicyKeep, PolicyReadonly:
			m.warn(WarnNoOldChart, r.Pattern.String(), fmt.Sprintf("rule %d (%s) has no old chart: no old default can be pinned", i+1, r.Policy))
		}
	}
}

// orphans warns about user keys that a non-empty map of the new chart's
// keys (defaults, and keys set to null) does not have: a typo, or a key
// the new chart dropped.
func (m *merger) orphans(keys []string, result map[string]any, defaults any) {
	dm, ok := defaults.(map[string]any)
	if !ok || len(dm) == 0 {
		return
	}
	for _, k := range sortedKeys(result) {
		if k == "global" {
			continue
		}
		path := append(append([]string(nil), keys...), k)
		dv, ok := dm[k]
		if !ok {
			m.warn(WarnOrphan, FormatPath(path), fmt.Sprintf("the new chart's defaults have no key %q here: a typo, or a key the chart dropped", k))
			continue
		}
		if sub, ok := result[k].(map[string]any); ok {
			m.orphans(path, sub, dv)
		}
	}
}
