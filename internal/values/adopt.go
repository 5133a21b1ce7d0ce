package values

import "fmt"

// adoptions prepares Input.Adopt: the value of each path an adopt rule
// decides (the first rule matching it is adopt), added to the paths the
// walk visits even when no tree has them. Two live fields that want one
// path at different values adopt neither: a warning says so.
func (m *merger) adoptions() {
	m.adopt = map[string]Adoption{}
	clash := map[string]bool{}
	for _, a := range m.in.Adopt {
		if !m.adoptDecides(a.Keys) {
			continue
		}
		path := FormatPath(a.Keys)
		if prior, ok := m.adopt[path]; ok && !equal(normalize(prior.Value), normalize(a.Value)) {
			if !clash[path] {
				m.warn(WarnAdopt, path, fmt.Sprintf("not adopted: %s %s and %s %s want different values of it", prior.Object, prior.Field, a.Object, a.Field))
			}
			clash[path] = true
			continue
		}
		a.Value = normalize(a.Value)
		m.adopt[path] = a
		m.forced.add(a.Keys)
	}
	for p := range clash {
		delete(m.adopt, p)
	}
	for i, r := range m.in.Rules {
		if r.Policy == PolicyAdopt && !anyPathMatches(r.Pattern, m.in.NewDefaults, nil) && !anyPathMatches(r.Pattern, m.steps[len(m.steps)-1], nil) {
			m.warn(WarnAdopt, r.Pattern.String(), fmt.Sprintf("rule %d (adopt) matches no value of the new chart: nothing is adopted there", i+1))
		}
	}
}

// adoptDecides reports whether the rule that decides keys (the first that
// matches them or an ancestor) is an adopt rule.
func (m *merger) adoptDecides(keys []string) bool {
	for _, r := range m.in.Rules {
		if r.Pattern.MatchSelfOrAncestor(keys) {
			return r.Policy == PolicyAdopt
		}
	}
	return false
}

// anyPathMatches reports whether p matches a path of tree (or one of its
// ancestors does).
func anyPathMatches(p Pattern, tree any, keys []string) bool {
	m, ok := tree.(map[string]any)
	if !ok {
		return len(keys) > 0 && p.MatchSelfOrAncestor(keys)
	}
	if len(keys) > 0 && p.Match(keys) {
		return true
	}
	for k, v := range m {
		if anyPathMatches(p, v, append(keys[:len(keys):len(keys)], k)) {
			return true
		}
	}
	return false
}

// decideAdopt writes the live value of the field the path renders when an
// operator changed it; else the path is decided as user decides it.
func (m *merger) decideAdopt(d *Decision, u node) (node, bool) {
	a, ok := m.adopt[d.Path]
	if !ok {
		return node{}, false
	}
	d.Action = ActionAdopt
	d.Secret = d.Secret || a.Secret
	rendered := a.Rendered
	if d.Secret {
		rendered = Redaction
	}
	d.Reason = fmt.Sprintf("adopted from the live %s %s (changed by %s): %s, where the deployed revision rendered %s",
		a.Object, a.Field, a.Manager, show(a.Value, d.Secret), rendered)
	if u.set && !equal(u.v, a.Value) {
		d.Reason += fmt.Sprintf("; the user value was %s", show(u.v, d.Secret))
	}
	return node{v: DeepCopy(a.Value), set: true}, true
}
