package yamlfile

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Fields is a checked mapping: its keys, each once and each a string, in file
// order, with their values (aliases followed), and the mapping itself for
// locating errors.
type Fields struct {
	node  *yaml.Node
	field string
	names []string              // in file order
	keys  map[string]*yaml.Node // key nodes
	vals  map[string]*yaml.Node // value nodes; null ones included
}

// Node returns the mapping node.
func (m *Fields) Node() *yaml.Node { return m.node }

// Field returns the field path of the mapping.
func (m *Fields) Field() string { return m.field }

// Names returns the keys in file order.
func (m *Fields) Names() []string { return m.names }

// Key returns the key node of name, or nil when absent.
func (m *Fields) Key(name string) *yaml.Node { return m.keys[name] }

// Get returns the value of name, or nil when absent or null.
func (m *Fields) Get(name string) *yaml.Node {
	if n := m.vals[name]; !isNull(n) {
		return n
	}
	return nil
}

// Path returns the field path of name.
func (m *Fields) Path(name string) string { return Child(m.field, name) }

// Fields checks that n is a map holding only the allowed keys, each once.
func (f File) Fields(n *yaml.Node, field string, allowed ...string) (*Fields, error) {
	return f.mapping(n, field, allowed)
}

// Entries checks that n is a map whose keys are strings, each once, and
// allows any of them: for maps whose keys are names the user picks.
func (f File) Entries(n *yaml.Node, field string) (*Fields, error) {
	return f.mapping(n, field, nil)
}

// mapping checks a map; nil allowed lets any key through.
func (f File) mapping(n *yaml.Node, field string, allowed []string) (*Fields, error) {
	if n.Kind != yaml.MappingNode {
		return nil, f.Failf(n, field, "want a map, not %s", Describe(n))
	}
	m := &Fields{node: n, field: field, keys: map[string]*yaml.Node{}, vals: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		at := n.Content[i] // where the key is written, an alias or not
		k, v := resolve(at), resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			return nil, f.Failf(at, field, "merge keys (<<) are not supported")
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return nil, f.Failf(at, field, "want a field name, not %s%s", Describe(k), quoteHint(k))
		}
		name := k.Value
		if allowed != nil && !slices.Contains(allowed, name) {
			return nil, f.Failf(at, Child(field, name), "unknown field (want one of %s)", strings.Join(allowed, ", "))
		}
		if prev, ok := m.keys[name]; ok {
			return nil, f.Failf(at, Child(field, name), "duplicate field (first at line %d)", prev.Line)
		}
		m.names = append(m.names, name)
		m.keys[name] = at
		m.vals[name] = v
	}
	return m, nil
}

// Required returns the value of key, or an error naming it when absent or
// null.
func (f File) Required(m *Fields, key string) (*yaml.Node, error) {
	if n := m.Get(key); n != nil {
		return n, nil
	}
	if k := m.keys[key]; k != nil {
		return nil, f.Failf(k, m.Path(key), "missing a value (required)")
	}
	return nil, f.Failf(m.node, m.field, "missing required field %q", key)
}

// Sequence checks that n is a list and returns its items, aliases followed.
func (f File) Sequence(n *yaml.Node, field string) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, f.Failf(n, field, "want a list, not %s", Describe(n))
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		items[i] = resolve(c)
	}
	return items, nil
}

// String returns the text of n, which must be a string: a number or bool is
// not taken as the text it was written as.
func (f File) String(n *yaml.Node, field string) (string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		return n.Value, nil
	}
	return "", f.Failf(n, field, "want a string, not %s%s", Describe(n), quoteHint(n))
}

// OptString returns the text of an optional string field, "" when absent or
// null.
func (f File) OptString(m *Fields, key string) (string, error) {
	n := m.Get(key)
	if n == nil {
		return "", nil
	}
	return f.String(n, m.Path(key))
}

// ReqString returns the text of a required string field and its node; empty
// or blank text is an error.
func (f File) ReqString(m *Fields, key string) (string, *yaml.Node, error) {
	n, err := f.Required(m, key)
	if err != nil {
		return "", nil, err
	}
	s, err := f.String(n, m.Path(key))
	if err != nil {
		return "", nil, err
	}
	if strings.TrimSpace(s) == "" {
		return "", nil, f.Failf(n, m.Path(key), "must not be empty")
	}
	return s, n, nil
}

// Bool returns the value of n, which must be true or false unquoted: the
// string "true" is not a bool.
func (f File) Bool(n *yaml.Node, field string) (bool, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, nil
		}
	}
	return false, f.Failf(n, field, "want true or false, not %s", Describe(n))
}

// Duration returns the positive duration n holds, a string in Go's syntax
// (60s, 5m, 1h30m); example names durations that fit the field, for the
// message.
func (f File) Duration(n *yaml.Node, field, example string) (time.Duration, error) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!str" {
		return 0, f.Failf(n, field, "want a positive duration such as %s, not %s (%s)", example, Describe(n), n.Value)
	}
	if n.Kind != yaml.ScalarNode {
		return 0, f.Failf(n, field, "want a positive duration such as %s, not %s", example, Describe(n))
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d <= 0 {
		return 0, f.Failf(n, field, "want a positive duration such as %s, not %q", example, n.Value)
	}
	return d, nil
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// Describe names the type of a node for "want X, not Y" messages: "a
// string", "a number", "a map", ...
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a bool"
		case "!!null":
			return "null"
		case "!!timestamp":
			return "a timestamp"
		default:
			return fmt.Sprintf("a value tagged %s", n.Tag)
		}
	default:
		return "a document"
	}
}

// quoteHint tells how to write a scalar that YAML read as a number, bool or
// timestamp as the text it looks like.
func quoteHint(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return ""
	}
	switch n.Tag {
	case "!!int", "!!float", "!!bool", "!!timestamp":
		return fmt.Sprintf(" (write %s for the text)", strconv.Quote(n.Value))
	}
	return ""
}

// plainKey matches keys that need no quoting in a field path.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Child returns the field path of key under parent: parent.key, or
// parent["key"] when key is not plain letters, digits, '_' and '-'.
func Child(parent, key string) string {
	if !plainKey.MatchString(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// Index returns the field path of the i-th (0-based) item of a list, written
// 1-based as a person counts.
func Index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i+1) }
