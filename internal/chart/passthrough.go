package chart

import (
	"text/template/parse"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// wholeFuncs are the template functions that render a value whole, keys
// the chart never names included.
var wholeFuncs = map[string]bool{"toYaml": true, "toYamlPretty": true, "toJson": true, "toPrettyJson": true,
	"toRawJson": true, "toToml": true, "tpl": true}

// passedThrough are the paths of the values c's templates, and its
// subcharts', render whole: the arguments of a pipeline that calls
// toYaml, toJson or tpl (`toYaml .Values.podAnnotations`), what range
// iterates over, and what with binds when its body renders the dot whole
// (`with .Values.settings` then `toYaml .`). A user key below one is a key
// the chart passes on, not an orphan, though its defaults do not name it.
func passedThrough(c *chart.Chart) [][]string {
	return chartValuePaths(c, templatePassedThrough)
}

// templatePassedThrough are the .Values paths one template renders whole;
// none when it does not parse.
func templatePassedThrough(name, text string) [][]string {
	var out [][]string
	visitNodes(name, text, func(n parse.Node) {
		switch x := n.(type) {
		case *parse.ActionNode:
			out = append(out, wholeInPipe(x.Pipe)...)
		case *parse.IfNode:
			out = append(out, wholeInPipe(x.Pipe)...)
		case *parse.WithNode:
			out = append(out, wholeInPipe(x.Pipe)...)
			if rendersDotWhole(x.List) {
				out = append(out, valuePaths(x.Pipe)...)
			}
		case *parse.RangeNode:
			out = append(out, valuePaths(x.Pipe)...)
		}
	})
	return out
}

// wholeInPipe are the value paths of a pipeline, and of the pipelines
// nested in it, that call a function of wholeFuncs.
func wholeInPipe(p *parse.PipeNode) [][]string {
	if p == nil {
		return nil
	}
	if callsWhole(p) {
		return valuePaths(p)
	}
	var out [][]string
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			if nested, ok := a.(*parse.PipeNode); ok {
				out = append(out, wholeInPipe(nested)...)
			}
		}
	}
	return out
}

// callsWhole reports whether a command of p calls a function of
// wholeFuncs.
func callsWhole(p *parse.PipeNode) bool {
	for _, c := range p.Cmds {
		if len(c.Args) > 0 {
			if id, ok := c.Args[0].(*parse.IdentifierNode); ok && wholeFuncs[id.Ident] {
				return true
			}
		}
	}
	return false
}

// rendersDotWhole reports whether the body of a with renders its dot
// whole (`toYaml .`, `. | toYaml`), outside any inner with or range,
// which rebind the dot.
func rendersDotWhole(l *parse.ListNode) bool {
	if l == nil {
		return false
	}
	for _, n := range l.Nodes {
		switch x := n.(type) {
		case *parse.ActionNode:
			if pipeUsesDotWhole(x.Pipe) {
				return true
			}
		case *parse.IfNode:
			if pipeUsesDotWhole(x.Pipe) || rendersDotWhole(x.List) || rendersDotWhole(x.ElseList) {
				return true
			}
		}
	}
	return false
}

// pipeUsesDotWhole reports whether p, or a pipeline nested in it, calls a
// function of wholeFuncs on the dot.
func pipeUsesDotWhole(p *parse.PipeNode) bool {
	if p == nil {
		return false
	}
	whole := callsWhole(p)
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			switch x := a.(type) {
			case *parse.DotNode:
				if whole {
					return true
				}
			case *parse.PipeNode:
				if pipeUsesDotWhole(x) {
					return true
				}
			}
		}
	}
	return false
}
