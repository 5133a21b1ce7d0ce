package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Error is one problem in a file, located by line and field path. Its
// message is "FILE[:LINE]: [FIELD: ]WHAT".
type Error struct {
	File  string // the file as the caller named it
	Line  int    // 1-based; 0 when unknown
	Field string // e.g. charts[2].rules[3].policy; "" for the document or its root
	Err   error  // what is wrong
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// syntaxError is a YAML parser error with its "yaml: line N: " prefix moved
// into the Error location.
type syntaxError struct {
	msg string
	err error
}

func (e *syntaxError) Error() string { return "invalid YAML: " + e.msg }
func (e *syntaxError) Unwrap() error { return e.err }

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// File checks the nodes of one YAML file and locates errors in it. The zero
// value names no file; set Name.
type File struct {
	Name string // names the file in errors, as the user gave it
}

// StdinPath is the path that names standard input, as in `helm -f -` and
// `kubectl apply -f -`.
const StdinPath = "-"

// Name is how errors name the file at path: "standard input" for "-".
func Name(path string) string {
	if path == StdinPath {
		return "standard input"
	}
	return path
}

// Read reads the file at path for Parse; "-" reads standard input to its
// end. A file that cannot be read is bad input "reading WHAT: ...", naming
// the path.
func Read(path, what string) ([]byte, error) {
	var data []byte
	var err error
	if path == StdinPath {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("reading %s: %w", what, err))
	}
	return data, nil
}

// Parse parses data as exactly one YAML document and returns its root node,
// aliases followed. A file without a document, or holding only comments or
// null, is the error empty (e.g. "empty policy file (want rules or
// migrations)"). Empty documents after the first are ignored; any other
// document is an error naming its line.
func (f File) Parse(data []byte, empty string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root *yaml.Node
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, f.syntax(err)
		}
		var n *yaml.Node
		if len(doc.Content) > 0 {
			n = resolve(doc.Content[0])
		}
		if isNull(n) {
			n = nil
		}
		if i == 0 {
			root = n
			continue
		}
		if n != nil {
			return nil, f.Failf(&doc, "", "a second YAML document; the file must hold one")
		}
	}
	if root == nil {
		return nil, f.Fail(nil, "", errors.New(empty))
	}
	return root, nil
}

// Fail returns err located at n (nil n: no line) and field, marked as bad
// input.
func (f File) Fail(n *yaml.Node, field string, err error) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return outcome.BadInput(&Error{File: f.Name, Line: line, Field: field, Err: err})
}

// Failf is Fail with a formatted message.
func (f File) Failf(n *yaml.Node, field, format string, args ...any) error {
	return f.Fail(n, field, fmt.Errorf(format, args...))
}

func (f File) syntax(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return outcome.BadInput(&Error{File: f.Name, Line: line, Err: &syntaxError{msg: m[2], err: err}})
	}
	return outcome.BadInput(&Error{File: f.Name, Err: &syntaxError{msg: strings.TrimPrefix(msg, "yaml: "), err: err}})
}
