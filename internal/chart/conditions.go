package chart

import (
	"strings"
	"text/template/parse"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// conditionValues are the paths of the values c's templates, and its
// subcharts', test in a condition: the pipelines of if, else if and with
// (`if eq .Values.controller.kind "Deployment"`), each as a path of the
// chart's effective values (a subchart's under its name; its globals also
// under global). Tracing leaves them unmarked, so the condition goes the
// way it goes for real and what it renders is traced. A value reached
// through a variable or a changed dot (`with .Values.x` then `.kind`) is
// not found: it is marked, and what it guards reads "under a condition".
func conditionValues(c *chart.Chart) [][]string {
	return chartValuePaths(c, templateConditions)
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

// templateConditions are the .Values paths the conditions of one
// template test; none when it does not parse (the render says why).
func templateConditions(name, text string) [][]string {
	var out [][]string
	visitNodes(name, text, func(n parse.Node) {
		switch x := n.(type) {
		case *parse.IfNode:
			out = append(out, valuePaths(x.Pipe)...)
		case *parse.WithNode:
			out = append(out, valuePaths(x.Pipe)...)
		}
	})
	return out
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
