package spec

import (
	"errors"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// FuzzParsePolicy checks that ParsePolicy never panics, that every error is
// bad input, and that an accepted policy written back out parses to the same
// rules and migrations.
func FuzzParsePolicy(f *testing.F) {
	for _, seed := range []string{
		"",
		"rules: []\n",
		"rules:\n- {path: a.b, policy: chart}\n- {path: '**.resources', policy: max}\n",
		"rules:\n- path: x\n  policy: live\n  source: {apiVersion: v1, kind: ConfigMap, namespace: n, name: c}\n  expr: .data.x\n",
		"migrations:\n- {name: m, from: '<1.1.0', to: '>=1.1.0', expr: 'del(.a)'}\n",
		"rules:\n- {path: 'a[\"b.c\"].*', policy: follow}\nmigrations:\n- {name: a, expr: .a}\n- {name: a, expr: .b}\n",
		"rules: {a: b}\n",
		"rules:\n- &r {path: a, policy: keep}\n- *r\n",
		"a: [\n",
		"rules: []\n---\nrules: []\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, outcome.ErrBadInput) {
				t.Fatalf("error is not bad input: %v", err)
			}
			return
		}
		again, err := ParsePolicy("fuzz.yaml", data)
		if err != nil || len(again.Rules) != len(p.Rules) || len(again.Migrations) != len(p.Migrations) {
			t.Fatalf("second parse differs: %v", err)
		}

		// Write the policy back out and read it again.
		type source struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Namespace  string `yaml:"namespace,omitempty"`
			Name       string `yaml:"name"`
		}
		type rule struct {
			Path   string  `yaml:"path"`
			Policy string  `yaml:"policy"`
			Source *source `yaml:"source,omitempty"`
			Expr   string  `yaml:"expr,omitempty"`
		}
		type migration struct {
			Name string `yaml:"name"`
			Expr string `yaml:"expr"`
		}
		var out struct {
			Rules      []rule      `yaml:"rules"`
			Migrations []migration `yaml:"migrations"`
		}
		for _, r := range p.Rules {
			w := rule{Path: r.Pattern.String(), Policy: string(r.Policy)}
			if r.Source != nil {
				w.Source = &source{r.Source.APIVersion, r.Source.Kind, r.Source.Namespace, r.Source.Name}
			}
			if r.Expr != nil {
				w.Expr = r.Expr.String()
			}
			out.Rules = append(out.Rules, w)
		}
		for _, m := range p.Migrations {
			out.Migrations = append(out.Migrations, migration{Name: m.Name, Expr: m.Expr.String()})
		}
		data2, err := yaml.Marshal(out)
		if err != nil {
			t.Fatalf("encoding: %v", err)
		}
		p2, err := ParsePolicy("fuzz2.yaml", data2)
		if err != nil {
			t.Fatalf("written back, the policy does not parse: %v\n%s", err, data2)
		}
		if len(p2.Rules) != len(p.Rules) || len(p2.Migrations) != len(p.Migrations) {
			t.Fatalf("written back: %d rules, %d migrations; want %d, %d", len(p2.Rules), len(p2.Migrations), len(p.Rules), len(p.Migrations))
		}
		for i := range p.Rules {
			if p2.Rules[i].Pattern.String() != p.Rules[i].Pattern.String() || p2.Rules[i].Policy != p.Rules[i].Policy {
				t.Fatalf("rule %d changed: %v → %v", i+1, p.Rules[i], p2.Rules[i])
			}
		}
		for i := range p.Migrations {
			if p2.Migrations[i].Name != p.Migrations[i].Name {
				t.Fatalf("migration %d changed name: %q → %q", i+1, p.Migrations[i].Name, p2.Migrations[i].Name)
			}
		}
	})
}
