package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// fieldError is one problem in a file, located by line and field path.
type fieldError struct {
	file  string
	line  int    // 1-based; 0 when unknown
	field string // e.g. charts[2].rules[3].policy; "" for the document
	err   error
}

func (e *fieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.file)
	if e.line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.line))
	}
	b.WriteString(": ")
	if e.field != "" {
		b.WriteString(e.field)
		b.WriteString(": ")
	}
	b.WriteString(e.err.Error())
	return b.String()
}

func (e *fieldError) Unwrap() error { return e.err }

// syntaxError is a YAML parser error with its "yaml: line N: " prefix moved
// into the fieldError location.
type syntaxError struct {
	msg string
	err error
}

func (e *syntaxError) Error() string { return "invalid YAML: " + e.msg }
func (e *syntaxError) Unwrap() error { return e.err }

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// walker walks the yaml.Node tree of one file and builds located errors.
type walker struct{ file string }

// fail returns err located at n (nil n: no line) and marked as bad input.
func (w walker) fail(n *yaml.Node, field string, err error) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return outcome.BadInput(&fieldError{file: w.file, line: line, field: field, err: err})
}

func (w walker) failf(n *yaml.Node, field, format string, args ...any) error {
	return w.fail(n, field, fmt.Errorf(format, args...))
}

// document parses data as exactly one YAML document and returns its root
// node, or nil when the file holds no document or only null. Empty documents
// after the first one are ignored; any other is an error.
func (w walker) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root *yaml.Node
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return root, nil
		}
		if err != nil {
			return nil, w.syntax(err)
		}
		var n *yaml.Node
		if len(doc.Content) > 0 {
			n = resolve(doc.Content[0])
		}
		if n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			n = nil
		}
		if i == 0 {
			root = n
			continue
		}
		if n != nil {
			return nil, w.failf(&doc, "", "a second YAML document; the file must hold one")
		}
	}
}

func (w walker) syntax(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return outcome.BadInput(&fieldError{file: w.file, line: line, err: &syntaxError{msg: m[2], err: err}})
	}
	return outcome.BadInput(&fieldError{file: w.file, err: &syntaxError{msg: strings.TrimPrefix(msg, "yaml: "), err: err}})
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

// describe names the type of a node for "want X, not Y" messages.
func describe(n *yaml.Node) string {
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
		default:
			return fmt.Sprintf("a value tagged %s", n.Tag)
		}
	default:
		return "a document"
	}
}

// fields is a checked mapping: each allowed key present, its value node
// (aliases followed), and the mapping itself for locating errors.
type fields struct {
	node  *yaml.Node
	field string
	keys  map[string]*yaml.Node // value nodes
	lines map[string]*yaml.Node // key nodes
}

// mapping checks that n is a map holding only the allowed keys, each once.
func (w walker) mapping(n *yaml.Node, field string, allowed ...string) (*fields, error) {
	if n.Kind != yaml.MappingNode {
		return nil, w.failf(n, field, "want a map, not %s", describe(n))
	}
	f := &fields{node: n, field: field, keys: map[string]*yaml.Node{}, lines: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, w.failf(k, field, "want a field name, not %s", describe(k))
		}
		if k.Tag == "!!merge" {
			return nil, w.failf(k, field, "merge keys (<<) are not supported")
		}
		name := k.Value
		if !slices.Contains(allowed, name) {
			return nil, w.failf(k, child(field, name), "unknown field (want one of %s)", strings.Join(allowed, ", "))
		}
		if prev, ok := f.lines[name]; ok {
			return nil, w.failf(k, child(field, name), "duplicate field (first at line %d)", prev.Line)
		}
		f.lines[name] = k
		f.keys[name] = v
	}
	return f, nil
}

// get returns the value of key, or nil when absent or null.
func (f *fields) get(key string) *yaml.Node {
	if n := f.keys[key]; !isNull(n) {
		return n
	}
	return nil
}

// path returns the field path of key.
func (f *fields) path(key string) string { return child(f.field, key) }

// required returns the value of key, or an error naming it when absent or null.
func (w walker) required(f *fields, key string) (*yaml.Node, error) {
	if n := f.get(key); n != nil {
		return n, nil
	}
	if k, ok := f.lines[key]; ok {
		return nil, w.failf(k, f.path(key), "missing a value (required)")
	}
	return nil, w.failf(f.node, f.field, "missing required field %q", key)
}

// sequence checks that n is a list and returns its items, aliases followed.
func (w walker) sequence(n *yaml.Node, field string) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, w.failf(n, field, "want a list, not %s", describe(n))
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		items[i] = resolve(c)
	}
	return items, nil
}

// str returns the text of a scalar written as a string or a number.
func (w walker) str(n *yaml.Node, field string) (string, error) {
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!!str", "!!int", "!!float":
			return n.Value, nil
		}
	}
	return "", w.failf(n, field, "want a string, not %s", describe(n))
}

// optStr returns the text of an optional string field, "" when absent.
func (w walker) optStr(f *fields, key string) (string, error) {
	n := f.get(key)
	if n == nil {
		return "", nil
	}
	return w.str(n, f.path(key))
}

// reqStr returns the text of a required string field; empty text is an error.
func (w walker) reqStr(f *fields, key string) (string, *yaml.Node, error) {
	n, err := w.required(f, key)
	if err != nil {
		return "", nil, err
	}
	s, err := w.str(n, f.path(key))
	if err != nil {
		return "", nil, err
	}
	if strings.TrimSpace(s) == "" {
		return "", nil, w.failf(n, f.path(key), "must not be empty")
	}
	return s, n, nil
}

// plainKey matches keys that need no quoting in a field path.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// child returns the field path of key under parent.
func child(parent, key string) string {
	if !plainKey.MatchString(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// index returns the field path of the i-th (0-based) item of a list, written
// 1-based.
func index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i+1) }
