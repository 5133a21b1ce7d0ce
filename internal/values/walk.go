package values

import "sort"

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

func isMap(n node) bool {
	_, ok := n.v.(map[string]any)
	return n.set && ok
}

// ruleState is how far each rule's pattern got along the current path.
type ruleState []matchState

// cursor is where the walk stands: the path, as keys and as formatted
// text, and whether a key on it looks secret.
type cursor struct {
	path   string
	secret bool
}

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
	if decided >= 0 {
		states = states[:decided]
	}
	m.keys = m.keys[:0]
	m.children(vals, states, decided, m.forced, cursor{})
}

// stateBuf returns a reusable rule-state slice for the current depth: the
// walk is depth-first, so one buffer per depth is enough.
func (m *merger) stateBuf(n int) ruleState {
	d := len(m.keys)
	for len(m.stateBufs) <= d {
		m.stateBufs = append(m.stateBufs, make(ruleState, len(m.in.Rules)))
	}
	return m.stateBufs[d][:n]
}

// visit handles the node reached by the last key of m.keys.
func (m *merger) visit(vals [nTrees]node, parent ruleState, decided int, forced *trie, at cursor) {
	key := m.keys[len(m.keys)-1]
	states := m.stateBuf(len(parent))
	for i := range parent {
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
	// a map an adopt rule adopts whole (a block rendered from it, keys
	// added live) is decided here, not key by key
	_, adoptHere := m.adopt[at.path]
	adoptHere = adoptHere && forced != nil && forced.end && decided >= 0 && m.in.Rules[decided].Policy == PolicyAdopt
	if liveHere || adoptHere || m.isLeaf(vals, forced) {
		m.leaf(vals, states, decided, liveHere, at)
		return
	}
	if forced != nil && len(forced.children) > 0 {
		m.replacedByLive(vals, decided, at)
	}
	m.children(vals, states, decided, forced, at)
}

// isLeaf: some tree holds a non-map here and no live path goes deeper, or
// no tree has anything below.
func (m *merger) isLeaf(vals [nTrees]node, forced *trie) bool {
	if forced != nil && len(forced.children) > 0 {
		return false
	}
	hasChildren := false
	for _, n := range vals {
		if !n.set {
			continue
		}
		mm, ok := n.v.(map[string]any)
		if !ok {
			return true
		}
		if len(mm) > 0 {
			hasChildren = true
		}
	}
	return !hasChildren
}

// children visits the keys below the current path in sorted order.
func (m *merger) children(vals [nTrees]node, states ruleState, decided int, forced *trie, at cursor) {
	var maps [nTrees]map[string]any
	n := 0
	for t, v := range vals {
		if mm, ok := v.v.(map[string]any); ok && v.set {
			maps[t] = mm
			n += len(mm)
		}
	}
	keys := make([]string, 0, n)
	for _, mm := range maps {
		for k := range mm {
			keys = append(keys, k)
		}
	}
	if forced != nil {
		for k := range forced.children {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 && keys[i-1] == k {
			continue
		}
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
		m.visit(child, states, decided, forced.child(k), cursor{path: joinPath(at.path, k), secret: at.secret || m.secretKey(k)})
		m.keys = m.keys[:len(m.keys)-1]
	}
}

// replacedByLive records the user's non-map value at a path below which a
// live or once rule writes: the map it writes replaces it.
func (m *merger) replacedByLive(vals [nTrees]node, decided int, at cursor) {
	u0, over := vals[tUser0], vals[tOver]
	if (!u0.set || isMap(u0)) && (!over.set || isMap(over)) {
		return
	}
	d := Decision{Path: at.path, Policy: PolicyUser, User: u0.value(), New: vals[tNew].value(), Action: ActionDrop,
		Reason: "a live or once rule writes below this path: the user's value here is replaced by that map", Secret: at.secret}
	if m.hasOld {
		d.Old = vals[tOld].value()
	}
	if decided >= 0 {
		d.Policy, d.Rule = m.in.Rules[decided].Policy, decided+1
	}
	m.decisions = append(m.decisions, d)
}

// joinPath appends a key to a formatted path (FormatPath, incrementally).
func joinPath(prefix, key string) string {
	if isPlainKey(key) {
		if prefix == "" {
			return key
		}
		return prefix + "." + key
	}
	return prefix + FormatPath([]string{key})
}

func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
