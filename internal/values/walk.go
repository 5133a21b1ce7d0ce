package values

// node is one tree's value at the current path.
type node struct {
	v   any
	set bool
}

func (n node) value() Value { return Value{V: n.v, Set: n.set} }

// sameNode reports whether two nodes are both unset, or both set and equal.
func sameNode(a, b node) bool {
	if a.set != b.set {
		return false
	}
	return !a.set || equal(a.v, b.v)
}

// ruleState is how far each rule's pattern got along the current path.
type ruleState []matchState

// walk visits every leaf of the union of the trees once, in key order, and
// decides it. A leaf is a path where some tree holds a non-map (lists and
// null included), a map empty in every tree, or the path of a live rule.
func (m *merger) walk() {
	var vals [nTrees]node
	vals[tUser0] = node{m.steps[0], true}
	vals[tUser] = node{m.steps[len(m.steps)-1], true}
	vals[tOld] = node{m.in.OldDefaults, m.hasOld}
	vals[tNew] = node{m.in.NewDefaults, m.in.NewDefaults != nil}
	vals[tOver] = node{m.overrides, true}

	states := make(ruleState, len(m.in.Rules))
	decided := -1
	for i, r := range m.in.Rules {
		states[i] = r.Pattern.start()
		if decided < 0 && states[i]&r.Pattern.accept() != 0 {
			decided = i
		}
	}
	m.keys = m.keys[:0]
	m.children(vals, states, decided, m.forced)
}

// visit handles the node reached by key.
func (m *merger) visit(vals [nTrees]node, parent ruleState, decided int, forced *trie) {
	key := m.keys[len(m.keys)-1]
	limit := len(m.in.Rules)
	if decided >= 0 {
		limit = decided
	}
	states := make(ruleState, limit)
	for i := 0; i < limit; i++ {
		r := &m.in.Rules[i]
		states[i] = r.Pattern.step(parent[i], key)
		if states[i]&r.Pattern.accept() != 0 {
			decided = i
			states = states[:i]
			break
		}
	}

	liveHere := forced != nil && forced.end && decided >= 0 && m.in.Rules[decided].Policy.needsSource() &&
		len(m.in.Rules[decided].Pattern.segs) == len(m.keys)
	if liveHere || m.isLeaf(vals, forced) {
		m.leaf(vals, decided, liveHere)
		return
	}
	m.children(vals, states, decided, forced)
}

// isLeaf: some tree holds a non-map here and no live path goes deeper, or
// no tree has anything below.
func (m *merger) isLeaf(vals [nTrees]node, forced *trie) bool {
	hasChildren := forced != nil && len(forced.children) > 0
	nonMap := false
	for _, n := range vals {
		if !n.set {
			continue
		}
		mm, ok := n.v.(map[string]any)
		if !ok {
			nonMap = true
			continue
		}
		if len(mm) > 0 {
			hasChildren = true
		}
	}
	if forced != nil && len(forced.children) > 0 {
		return false
	}
	return nonMap || !hasChildren
}

// children visits the keys below the current path in sorted order.
func (m *merger) children(vals [nTrees]node, states ruleState, decided int, forced *trie) {
	var maps [nTrees]map[string]any
	var present []map[string]any
	for t, n := range vals {
		if mm, ok := n.v.(map[string]any); ok && n.set {
			maps[t] = mm
			present = append(present, mm)
		}
	}
	if forced != nil && len(forced.children) > 0 {
		extra := make(map[string]any, len(forced.children))
		for k := range forced.children {
			extra[k] = nil
		}
		present = append(present, extra)
	}
	for _, k := range sortedKeys(present...) {
		var child [nTrees]node
		for t, mm := range maps {
			if mm == nil {
				continue
			}
			if v, ok := mm[k]; ok {
				child[t] = node{v, true}
			}
		}
		m.keys = append(m.keys, k)
		m.visit(child, states, decided, forced.child(k))
		m.keys = m.keys[:len(m.keys)-1]
	}
}
