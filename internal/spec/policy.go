package spec

import (
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// Policy is the content of a policy file: the rules and migrations of one
// merge, in file order.
type Policy struct {
	Rules      []values.Rule
	Migrations []values.Migration
}

// ParsePolicy parses a policy file holding the optional keys rules and
// migrations; file names the input in errors. An empty file, or one holding
// only null or comments, is an error: a policy without rules is written {}.
// Errors are bad input and follow the package format.
func ParsePolicy(file string, data []byte) (*Policy, error) {
	w := walker{File: yamlfile.File{Name: file}}
	root, err := w.Parse(data, "empty policy file (want rules, migrations or both; {} is a policy without rules)")
	if err != nil {
		return nil, err
	}
	f, err := w.Fields(root, "", "rules", "migrations")
	if err != nil {
		return nil, err
	}
	rules, err := w.rules(f.Get("rules"), f.Path("rules"))
	if err != nil {
		return nil, err
	}
	migrations, err := w.migrations(f.Get("migrations"), f.Path("migrations"))
	if err != nil {
		return nil, err
	}
	return &Policy{Rules: rules, Migrations: migrations}, nil
}

// LoadPolicy reads and parses the policy file at path. A file that cannot be
// read is bad input naming the path.
func LoadPolicy(path string) (*Policy, error) {
	data, err := yamlfile.Read(path, "policy file")
	if err != nil {
		return nil, err
	}
	return ParsePolicy(yamlfile.Name(path), data)
}

// rules parses a list of rules; nil n is no rules.
func (w walker) rules(n *yaml.Node, field string) ([]values.Rule, error) {
	if n == nil {
		return nil, nil
	}
	items, err := w.Sequence(n, field)
	if err != nil {
		return nil, err
	}
	rules := make([]values.Rule, 0, len(items))
	for i, item := range items {
		r, err := w.rule(item, yamlfile.Index(field, i))
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func (w walker) rule(n *yaml.Node, field string) (values.Rule, error) {
	f, err := w.Fields(n, field, "path", "policy", "source", "expr", "unless")
	if err != nil {
		return values.Rule{}, err
	}
	text, pn, err := w.ReqString(f, "path")
	if err != nil {
		return values.Rule{}, err
	}
	pattern, err := values.ParsePattern(text)
	if err != nil {
		return values.Rule{}, w.Fail(pn, f.Path("path"), err)
	}
	text, pn, err = w.ReqString(f, "policy")
	if err != nil {
		return values.Rule{}, err
	}
	policy, err := values.ParsePolicy(text)
	if err != nil {
		return values.Rule{}, w.Fail(pn, f.Path("policy"), err)
	}
	var source *values.ObjectRef
	if sn := f.Get("source"); sn != nil {
		if source, err = w.objectRef(sn, f.Path("source")); err != nil {
			return values.Rule{}, err
		}
	}
	expr, err := w.expr(f)
	if err != nil {
		return values.Rule{}, err
	}
	r, err := values.NewRule(pattern, policy, source, expr)
	if err != nil {
		return values.Rule{}, w.Fail(n, field, err)
	}
	if un := f.Get("unless"); un != nil {
		if r, err = w.unless(r, un, f.Path("unless")); err != nil {
			return values.Rule{}, err
		}
	}
	return r, nil
}

// unless reads a live rule's unless: {equals: VALUE, then: VALUE} or
// {equals: VALUE, thenDefault: true}.
func (w walker) unless(r values.Rule, n *yaml.Node, field string) (values.Rule, error) {
	f, err := w.Fields(n, field, "equals", "then", "thenDefault")
	if err != nil {
		return r, err
	}
	var u values.Unless
	en, err := w.Required(f, "equals")
	if err != nil {
		return r, err
	}
	if err := en.Decode(&u.Equals); err != nil || en.Kind != yaml.ScalarNode {
		return r, w.Failf(en, f.Path("equals"), "want the live value to replace (a string, number or bool), not %s", yamlfile.Describe(en))
	}
	if tn := f.Get("then"); tn != nil {
		if err := tn.Decode(&u.Then); err != nil {
			return r, w.Failf(tn, f.Path("then"), "want the value instead: %v", err)
		}
	}
	if dn := f.Get("thenDefault"); dn != nil {
		if u.ThenDefault, err = w.Bool(dn, f.Path("thenDefault")); err != nil {
			return r, err
		}
	}
	out, err := r.WithUnless(u)
	if err != nil {
		return r, w.Fail(n, field, err)
	}
	return out, nil
}

// objectRef parses the source of a live or once rule.
func (w walker) objectRef(n *yaml.Node, field string) (*values.ObjectRef, error) {
	f, err := w.Fields(n, field, "apiVersion", "kind", "namespace", "name")
	if err != nil {
		return nil, err
	}
	var ref values.ObjectRef
	if ref.APIVersion, _, err = w.ReqString(f, "apiVersion"); err != nil {
		return nil, err
	}
	if ref.Kind, _, err = w.ReqString(f, "kind"); err != nil {
		return nil, err
	}
	if ref.Namespace, err = w.OptString(f, "namespace"); err != nil {
		return nil, err
	}
	if ref.Name, _, err = w.ReqString(f, "name"); err != nil {
		return nil, err
	}
	return &ref, nil
}

// expr parses the optional yq expression of f; nil when absent.
func (w walker) expr(f *yamlfile.Fields) (*values.Expr, error) {
	n := f.Get("expr")
	if n == nil {
		return nil, nil
	}
	text, err := w.String(n, f.Path("expr"))
	if err != nil {
		return nil, err
	}
	e, err := values.ParseExpr(text)
	if err != nil {
		return nil, w.Fail(n, f.Path("expr"), err)
	}
	return e, nil
}

// migrations parses a list of migrations with distinct names; nil n is none.
func (w walker) migrations(n *yaml.Node, field string) ([]values.Migration, error) {
	if n == nil {
		return nil, nil
	}
	items, err := w.Sequence(n, field)
	if err != nil {
		return nil, err
	}
	migrations := make([]values.Migration, 0, len(items))
	seen := map[string]int{} // name → index
	for i, item := range items {
		m, err := w.migration(item, yamlfile.Index(field, i))
		if err != nil {
			return nil, err
		}
		if j, ok := seen[m.Name]; ok {
			return nil, w.Failf(item, yamlfile.Index(field, i)+".name",
				"duplicate migration name %q (also %s, line %d)", m.Name, yamlfile.Index(field, j), items[j].Line)
		}
		seen[m.Name] = i
		migrations = append(migrations, m)
	}
	return migrations, nil
}

func (w walker) migration(n *yaml.Node, field string) (values.Migration, error) {
	f, err := w.Fields(n, field, "name", "from", "to", "expr")
	if err != nil {
		return values.Migration{}, err
	}
	name, _, err := w.ReqString(f, "name")
	if err != nil {
		return values.Migration{}, err
	}
	from, err := w.constraint(f, "from")
	if err != nil {
		return values.Migration{}, err
	}
	to, err := w.constraint(f, "to")
	if err != nil {
		return values.Migration{}, err
	}
	if _, err := w.Required(f, "expr"); err != nil {
		return values.Migration{}, err
	}
	expr, err := w.expr(f)
	if err != nil {
		return values.Migration{}, err
	}
	m, err := values.NewMigration(name, from, to, expr)
	if err != nil {
		return values.Migration{}, w.Fail(n, field, err)
	}
	return m, nil
}

// constraint returns the text of an optional semver constraint field after
// checking that it parses.
func (w walker) constraint(f *yamlfile.Fields, key string) (string, error) {
	s, err := w.OptString(f, key)
	if err != nil {
		return "", err
	}
	if _, err := values.ParseConstraint(s); err != nil {
		return "", w.Fail(f.Get(key), f.Path(key), err)
	}
	return s, nil
}
