package chart

import (
	"path"
	"sort"
	"strings"
	"text/template/parse"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// regenerating are the template functions that return new data at every
// render: keys, certificates, random strings, the time.
var regenerating = map[string]bool{
	"genCA":                    true,
	"genCAWithKey":             true,
	"genPrivateKey":            true,
	"genSelfSignedCert":        true,
	"genSelfSignedCertWithKey": true,
	"genSignedCert":            true,
	"genSignedCertWithKey":     true,
	"randAlpha":                true,
	"randAlphaNum":             true,
	"randAscii":                true,
	"randBytes":                true,
	"randInt":                  true,
	"randNumeric":              true,
	"uuidv4":                   true,
	"now":                      true,
}

// guard is the function whose use marks a template as keeping what it
// generated once: it can read back the live object.
const guard = "lookup"

// RegeneratedData returns the templates of c, and of its subcharts at any
// depth, that call a function generating new data at every render (genCA,
// genPrivateKey, genSelfSignedCert, genSignedCert and their WithKey forms,
// randAlpha, randAlphaNum, randAscii, randBytes, randInt, randNumeric,
// uuidv4, now) and never call lookup. Only calls count: not a comment, a
// string, a field such as .Values.now or a variable such as $now. NOTES.txt
// is skipped, as it makes no object.
//
// Paths are relative to the top chart and sorted: "templates/webhook.yaml",
// "charts/sub/templates/_helpers.tpl". The scan is static and per file: a
// named template defined in one file and included from another is reported
// where it is defined.
func RegeneratedData(c *chart.Chart) []string {
	if c == nil {
		return nil
	}
	seen := map[string]bool{}
	scanChart(c, "", seen)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func scanChart(c *chart.Chart, prefix string, seen map[string]bool) {
	for _, f := range c.Templates {
		if f == nil || path.Base(f.Name) == "NOTES.txt" {
			continue
		}
		calls := templateCalls(f.Name, string(f.Data))
		if calls[guard] {
			continue
		}
		for fn := range calls {
			if regenerating[fn] {
				seen[prefix+f.Name] = true
				break
			}
		}
	}
	for _, sub := range c.Dependencies() {
		scanChart(sub, prefix+"charts/"+sub.Name()+"/", seen)
	}
}

// templateCalls returns the names of the functions a template calls.
func templateCalls(name, text string) map[string]bool {
	calls := map[string]bool{}
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	main, err := t.Parse(text, "", "", trees)
	if err != nil {
		// Helm will refuse to render it; still say what it seems to call.
		return scanCalls(text)
	}
	trees[""] = main
	for _, tr := range trees {
		if tr != nil {
			walk(tr.Root, calls)
		}
	}
	return calls
}

// walk records the identifiers called anywhere under n.
func walk(n parse.Node, calls map[string]bool) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			walk(c, calls)
		}
	case *parse.ActionNode:
		walk(x.Pipe, calls)
	case *parse.PipeNode:
		if x == nil {
			return
		}
		for _, c := range x.Cmds {
			walk(c, calls)
		}
	case *parse.CommandNode:
		for _, a := range x.Args {
			walk(a, calls)
		}
	case *parse.ChainNode:
		walk(x.Node, calls)
	case *parse.IdentifierNode:
		calls[x.Ident] = true
	case *parse.IfNode:
		walkBranch(&x.BranchNode, calls)
	case *parse.RangeNode:
		walkBranch(&x.BranchNode, calls)
	case *parse.WithNode:
		walkBranch(&x.BranchNode, calls)
	case *parse.TemplateNode:
		walk(x.Pipe, calls)
	}
}

func walkBranch(b *parse.BranchNode, calls map[string]bool) {
	walk(b.Pipe, calls)
	walk(b.List, calls)
	walk(b.ElseList, calls)
}

// scanCalls is the fallback for a template that does not parse: it reads
// the identifiers inside {{ }} actions, skipping comments, quoted text and
// names after "." or "$".
func scanCalls(text string) map[string]bool {
	calls := map[string]bool{}
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			return calls
		}
		text = text[i+2:]
		body := strings.TrimLeft(strings.TrimPrefix(text, "-"), " \t\r\n")
		if strings.HasPrefix(body, "/*") {
			end := strings.Index(body, "*/")
			if end < 0 {
				return calls
			}
			text = body[end+2:]
			continue
		}
		text = scanAction(text, calls)
	}
}

// scanAction records the called identifiers of one action and returns the
// text after it.
func scanAction(text string, calls map[string]bool) string {
	for i := 0; i < len(text); {
		ch := text[i]
		switch {
		case strings.HasPrefix(text[i:], "}}"):
			return text[i+2:]
		case ch == '"' || ch == '\'' || ch == '`':
			i = skipQuoted(text, i)
		case isIdentStart(ch):
			j := i
			for j < len(text) && isIdentPart(text[j]) {
				j++
			}
			if i == 0 || (text[i-1] != '.' && text[i-1] != '$') {
				calls[text[i:j]] = true
			}
			i = j
		default:
			i++
		}
	}
	return ""
}

// skipQuoted returns the index after the quoted text starting at text[i].
func skipQuoted(text string, i int) int {
	q := text[i]
	for j := i + 1; j < len(text); j++ {
		switch {
		case text[j] == '\\' && q != '`':
			j++
		case text[j] == q:
			return j + 1
		}
	}
	return len(text)
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || ('0' <= c && c <= '9') }
