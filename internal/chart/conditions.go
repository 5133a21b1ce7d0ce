package chart

import (
	"slices"
	"strings"
	"text/template/parse"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// conditionValues are the paths of the values that tracing leaves
// unmarked (provenance.Mark) so that each condition of c's templates, and
// its subcharts', goes the way it goes for real, and what it renders is
// traced. A marker is a non-empty string, so a value a condition asks
// only whether it is empty (`if .Values.x`, `with`, `not`, `empty`,
// `kindIs "invalid"`, `hasKey`, and `and`/`or` of such) is kept only when
// marking would flip that: an empty string or a zero. One it tests
// otherwise (`if eq .Values.controller.kind "Deployment"`) is always kept.
// Each is a path of the chart's effective values (a subchart's under its
// name; its globals also under global). A value a condition reads through
// a changed dot or a variable (`.imageRoot.digest` in a helper given a
// dict) has no path here: each value of that last name is kept as above.
func conditionValues(c *chart.Chart, effective map[string]any, parsed templateTestsCache) [][]string {
	testsOf := parsed.of
	keep := chartValuePaths(c, func(name, text string) [][]string { return testedPaths(testsOf(name, text), false) })
	for _, p := range chartValuePaths(c, func(name, text string) [][]string { return testedPaths(testsOf(name, text), true) }) {
		if v, ok := values.Lookup(effective, p); ok && flipsWhenMarked(v) {
			keep = append(keep, p)
		}
	}
	telling := map[string]bool{} // a relative name, and whether a test of it tells more than emptiness
	chartValuePaths(c, func(name, text string) [][]string {
		for _, t := range testsOf(name, text) {
			if t.relative != "" {
				telling[t.relative] = telling[t.relative] || !t.truthOnly
			}
		}
		return nil
	})
	if len(telling) > 0 {
		eachValue(effective, nil, func(at []string, v any) {
			if tells, ok := telling[at[len(at)-1]]; ok && (tells || flipsWhenMarked(v)) {
				keep = append(keep, at)
			}
		})
	}
	return keep
}

// flipsWhenMarked says whether v is empty and a marker would not be: an
// empty string, a zero number or null.
func flipsWhenMarked(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case int:
		return x == 0
	case int64:
		return x == 0
	case float64:
		return x == 0
	}
	return false
}

// eachValue calls f with the path and value of each map entry below v
// (lists are not entered: a condition names no index).
func eachValue(v any, at []string, f func([]string, any)) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, e := range m {
		p := append(at[:len(at):len(at)], k)
		f(p, e)
		eachValue(e, p, f)
	}
}

// chartValuePaths are the paths of the values that of each template of c
// and its subcharts gives, each as a path of the chart's effective values
// (a subchart's under its name; its globals also under global), once.
func chartValuePaths(c *chart.Chart, of func(name, text string) [][]string) [][]string {
	var out [][]string
	seen := map[string]bool{}
	var walk func(c *chart.Chart, prefix []string)
	walk = func(c *chart.Chart, prefix []string) {
		for _, t := range c.Templates {
			if t == nil || !strings.HasPrefix(t.Name, "templates/") {
				continue
			}
			for _, p := range of(t.Name, string(t.Data)) {
				paths := [][]string{append(append([]string(nil), prefix...), p...)}
				if len(p) > 0 && p[0] == "global" && len(prefix) > 0 {
					paths = append(paths, p) // a subchart's globals are copies of the parent's
				}
				for _, full := range paths {
					if k := strings.Join(full, "\x00"); !seen[k] {
						seen[k] = true
						out = append(out, full)
					}
				}
			}
		}
		for _, sub := range c.Dependencies() {
			walk(sub, append(append([]string(nil), prefix...), sub.Name()))
		}
	}
	walk(c, nil)
	return out
}

// test is a value a condition reads: a .Values path, or the last name
// of a field read from a changed dot or a variable (relative:
// `.imageRoot.digest` is "digest"), and whether the condition asks of it
// only whether it is empty.
type test struct {
	path      []string
	relative  string
	truthOnly bool
	// ranged: a range reads it; literals are the texts a comparison
	// compares it with
	ranged   bool
	literals []any
}

// testedPaths are the .Values paths of tests (one template's), those
// asked only whether they are empty (truthOnly) or the others.
func testedPaths(tests []test, truthOnly bool) [][]string {
	var out [][]string
	for _, t := range tests {
		if t.path != nil && t.truthOnly == truthOnly {
			out = append(out, t.path)
		}
	}
	return out
}

// templateTestsCache holds each template's tests (templateTests) once,
// by name and text: the walks of one trace and the traces conditional
// probing makes of the same chart share it.
type templateTestsCache map[string][]test

func (c templateTestsCache) of(name, text string) []test {
	k := name + "\x00" + text
	ts, ok := c[k]
	if !ok {
		ts = templateTests(name, text)
		c[k] = ts
	}
	return ts
}

// templateTests are the values the conditions (if, else if, with) and the
// ranges of one template read; none when it does not parse.
func templateTests(name, text string) []test {
	var out []test
	visitNodes(name, text, func(n parse.Node) {
		switch x := n.(type) {
		case *parse.IfNode:
			out = append(out, pipeTests(x.Pipe, true)...)
		case *parse.WithNode:
			out = append(out, pipeTests(x.Pipe, true)...)
		case *parse.RangeNode:
			// a range over null ranges over nothing, over a marker fails:
			// asked, like a condition, only whether it is empty
			for _, t := range pipeTests(x.Pipe, true) {
				t.ranged = true
				out = append(out, t)
			}
		case *parse.ActionNode:
			// a test outside a condition picks a text all the same
			// (`(empty $config.uplink) | ternary "a" "b"`)
			out = append(out, inlineTests(x.Pipe)...)
		}
	})
	return out
}

// comparisons tell of their arguments what they are, not only whether
// they are empty.
var comparisons = map[string]bool{"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true}

// inlineTests are the values an action's pipeline tests without printing
// them: the arguments of an emptiness function (`empty`, `not`, `hasKey`,
// `kindIs "invalid"`) and of a comparison, at any depth of its
// parentheses. A value it only prints is none.
func inlineTests(p *parse.PipeNode) []test {
	if p == nil {
		return nil
	}
	var out []test
	for _, c := range p.Cmds {
		args := c.Args
		id, ok := args[0].(*parse.IdentifierNode)
		switch {
		case ok && (emptinessFuncs[id.Ident] || id.Ident == "kindIs" && len(args) == 3 && isString(args[1], "invalid")):
			for _, a := range args[1:] {
				out = append(out, argTests(a, true)...)
			}
			continue
		case ok && comparisons[id.Ident]:
			out = append(out, compared(args[1:])...)
			continue
		}
		for _, a := range args {
			if sub, ok := a.(*parse.PipeNode); ok {
				out = append(out, inlineTests(sub)...)
			}
		}
	}
	return out
}

// emptinessFuncs tell of their arguments only whether each is empty (or
// null, or has a key); andOr give one of their arguments, so they tell
// only that when their result is asked only that.
var (
	emptinessFuncs = map[string]bool{"not": true, "empty": true, "hasKey": true}
	andOr          = map[string]bool{"and": true, "or": true}
	// passesEmptiness give a result that is empty only when their
	// arguments are (`with (merge .Values.controller.image
	// .Values.global.image)`): asked only that, so are they
	passesEmptiness = map[string]bool{"merge": true, "mergeOverwrite": true, "default": true, "coalesce": true, "deepCopy": true}
)

// pipeTests are the values pipeline p reads; truth says whether p's result
// is asked only whether it is empty.
func pipeTests(p *parse.PipeNode, truth bool) []test {
	if p == nil {
		return nil
	}
	truth = truth && len(p.Cmds) == 1
	var out []test
	for _, c := range p.Cmds {
		argTruth := false
		args := c.Args
		if id, ok := args[0].(*parse.IdentifierNode); ok {
			switch {
			case emptinessFuncs[id.Ident], (andOr[id.Ident] || passesEmptiness[id.Ident]) && truth:
				argTruth = true
			case id.Ident == "kindIs" && len(args) == 3 && isString(args[1], "invalid"):
				argTruth = true
			}
			args = args[1:]
		} else if len(args) == 1 {
			argTruth = truth
		}
		if id, ok := c.Args[0].(*parse.IdentifierNode); ok && comparisons[id.Ident] {
			out = append(out, compared(args)...)
			continue
		}
		if id, ok := c.Args[0].(*parse.IdentifierNode); ok && id.Ident == "index" {
			if t, ok := indexed(args, argTruth); ok {
				// `index .Values.controller.extraArgs "update-status"`
				// tests that key, not the map
				out = append(out, t)
				continue
			}
		}
		for _, a := range args {
			out = append(out, argTests(a, argTruth)...)
		}
	}
	return out
}

// indexed is the value `index .Values.a "b" "c"` reads (a.b.c), when
// every key is a literal text.
func indexed(args []parse.Node, truth bool) (test, bool) {
	if len(args) < 2 {
		return test{}, false
	}
	ts := argTests(args[0], truth)
	if len(ts) != 1 || ts[0].path == nil {
		return test{}, false
	}
	t := ts[0]
	t.path = slices.Clone(t.path)
	for _, a := range args[1:] {
		s, ok := a.(*parse.StringNode)
		if !ok {
			return test{}, false
		}
		t.path = append(t.path, s.Text)
	}
	return t, true
}

// compared are the values the arguments of a comparison read, each with
// the texts it is compared with (`eq .Values.kind "DaemonSet"`).
func compared(args []parse.Node) []test {
	var literals []any
	for _, a := range args {
		switch x := a.(type) {
		case *parse.StringNode:
			literals = append(literals, x.Text)
		case *parse.NumberNode:
			if x.IsInt {
				literals = append(literals, x.Int64)
			}
		}
	}
	var out []test
	for _, a := range args {
		for _, t := range argTests(a, false) {
			t.literals = literals
			out = append(out, t)
		}
	}
	return out
}

// testedValues are the values c's conditions and ranges test, for
// conditional probing (provenance.Tested): each .Values path, and each
// value of effective named as a value read from a changed dot or a
// variable (`.imageRoot.digest`: every digest), once, with what ranges
// read it and the texts it is compared with.
func testedValues(c *chart.Chart, effective map[string]any, parsed templateTestsCache) []provenance.Tested {
	byPath := map[string]int{}
	var out []provenance.Tested
	add := func(at []string, t test) {
		k := strings.Join(at, "\x00")
		i, ok := byPath[k]
		if !ok {
			i = len(out)
			byPath[k] = i
			out = append(out, provenance.Tested{At: at})
		}
		out[i].Ranged = out[i].Ranged || t.ranged
		for _, l := range t.literals {
			if !slices.Contains(out[i].Literals, l) {
				out[i].Literals = append(out[i].Literals, l)
			}
		}
	}
	relative := map[string][]test{}
	var walk func(c *chart.Chart, prefix []string)
	walk = func(c *chart.Chart, prefix []string) {
		for _, tpl := range c.Templates {
			if tpl == nil || !strings.HasPrefix(tpl.Name, "templates/") {
				continue
			}
			for _, t := range parsed.of(tpl.Name, string(tpl.Data)) {
				switch {
				case t.path != nil:
					add(append(slices.Clone(prefix), t.path...), t)
				case t.relative != "":
					relative[t.relative] = append(relative[t.relative], t)
				}
			}
		}
		for _, sub := range c.Dependencies() {
			walk(sub, append(slices.Clone(prefix), sub.Name()))
		}
	}
	walk(c, nil)
	if len(relative) > 0 {
		var paths [][]string
		eachValue(effective, nil, func(at []string, _ any) { paths = append(paths, at) })
		slices.SortFunc(paths, func(a, b []string) int { return strings.Compare(strings.Join(a, "\x00"), strings.Join(b, "\x00")) })
		for _, at := range paths {
			for _, t := range relative[at[len(at)-1]] {
				add(at, t)
			}
		}
	}
	return out
}

func isString(n parse.Node, s string) bool {
	str, ok := n.(*parse.StringNode)
	return ok && str.Text == s
}

// argTests are the values one argument of a command reads.
func argTests(n parse.Node, truth bool) []test {
	switch x := n.(type) {
	case *parse.PipeNode:
		return pipeTests(x, truth)
	case *parse.FieldNode:
		if len(x.Ident) > 1 && x.Ident[0] == "Values" {
			return []test{{path: x.Ident[1:], truthOnly: truth}}
		}
		return []test{{relative: x.Ident[len(x.Ident)-1], truthOnly: truth}}
	case *parse.VariableNode:
		if len(x.Ident) > 2 && x.Ident[0] == "$" && x.Ident[1] == "Values" {
			return []test{{path: x.Ident[2:], truthOnly: truth}}
		}
		if len(x.Ident) > 1 {
			return []test{{relative: x.Ident[len(x.Ident)-1], truthOnly: truth}}
		}
	}
	return nil
}

// visitNodes calls visit with each node of a template's trees (its
// defines included), into lists and the branches of if, with and range;
// none when it does not parse.
func visitNodes(name, text string, visit func(parse.Node)) {
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		visit(n)
		switch x := n.(type) {
		case *parse.ListNode:
			if x == nil {
				return
			}
			for _, c := range x.Nodes {
				walk(c)
			}
		case *parse.IfNode:
			walk(x.List)
			walk(x.ElseList)
		case *parse.WithNode:
			walk(x.List)
			walk(x.ElseList)
		case *parse.RangeNode:
			walk(x.List)
			walk(x.ElseList)
		}
	}
	for _, tree := range parseTemplate(name, text) {
		walk(tree.Root)
	}
}

// parseTemplate parses one template, its defines included, without
// knowing its functions; nil when it does not parse.
func parseTemplate(name, text string) []*parse.Tree {
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	if _, err := t.Parse(text, "", "", trees); err != nil {
		return nil
	}
	out := make([]*parse.Tree, 0, len(trees))
	for _, tree := range trees {
		if tree != nil && tree.Root != nil {
			out = append(out, tree)
		}
	}
	return out
}

// valuePaths are the .Values paths (`.Values.a.b`, `$.Values.a.b`) a
// pipeline reads, nested pipelines included.
func valuePaths(n parse.Node) [][]string {
	var out [][]string
	var inPipe func(n parse.Node)
	inPipe = func(n parse.Node) {
		switch x := n.(type) {
		case *parse.PipeNode:
			if x == nil {
				return
			}
			for _, c := range x.Cmds {
				inPipe(c)
			}
		case *parse.CommandNode:
			for _, a := range x.Args {
				inPipe(a)
			}
		case *parse.FieldNode:
			if len(x.Ident) > 1 && x.Ident[0] == "Values" {
				out = append(out, x.Ident[1:])
			}
		case *parse.VariableNode:
			if len(x.Ident) > 2 && x.Ident[0] == "$" && x.Ident[1] == "Values" {
				out = append(out, x.Ident[2:])
			}
		case *parse.ChainNode:
			inPipe(x.Node)
		}
	}
	inPipe(n)
	return out
}
