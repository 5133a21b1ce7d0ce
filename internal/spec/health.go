package spec

import (
	"fmt"
	"regexp"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// kindName is a kind as manifests spell it.
var kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// gates reads wait.health: a list of gates, each
// {apiVersion, kind, namespace?, selector?, minCount?, filter?, each?,
// current, failed?, inProgress?}, its expressions compiled once here. The
// same gate twice is refused.
func (w walker) gates(n *yaml.Node, field string) ([]health.Gate, error) {
	items, err := w.Sequence(n, field)
	if err != nil {
		return nil, err
	}
	var out []health.Gate
	seen := map[string]int{}
	for i, item := range items {
		at := fmt.Sprintf("%s[%d]", field, i+1)
		g, err := w.gate(item, at)
		if err != nil {
			return nil, err
		}
		if j, ok := seen[g.String()]; ok {
			return nil, w.Failf(item, at, "the same gate as %s[%d] (line %d): %s", field, j+1, items[j].Line, g)
		}
		seen[g.String()] = i
		out = append(out, g)
	}
	return out, nil
}

func (w walker) gate(n *yaml.Node, field string) (health.Gate, error) {
	f, err := w.Fields(n, field, "apiVersion", "kind", "namespace", "selector", "minCount", "filter", "each", "current", "failed", "inProgress")
	if err != nil {
		return health.Gate{}, err
	}
	g := health.Gate{MinCount: 1, At: fmt.Sprintf("%s:%d: %s", w.Name, n.Line, field)}
	if g.APIVersion, g.Kind, g.Namespace, g.Selector, err = w.objects(f, "kubevirt.io/v1", "KubeVirt"); err != nil {
		return g, err
	}
	if mn := f.Get("minCount"); mn != nil {
		c, err := strconv.Atoi(mn.Value)
		if mn.Kind != yaml.ScalarNode || mn.Tag != "!!int" || err != nil || c < 0 {
			return g, w.Failf(mn, f.Path("minCount"), "want a whole number, 0 or more, not %s", yamlfile.Describe(mn))
		}
		g.MinCount = c
	}
	if g.Filter, err = w.celExpr(f, "filter", false); err != nil {
		return g, err
	}
	if en := f.Get("each"); en != nil {
		if g.Each, err = w.each(en, f.Path("each")); err != nil {
			return g, err
		}
	}
	if g.Current, err = w.celExpr(f, "current", true); err != nil {
		return g, err
	}
	if g.Failed, err = w.celExpr(f, "failed", false); err != nil {
		return g, err
	}
	if g.InProgress, err = w.celExpr(f, "inProgress", false); err != nil {
		return g, err
	}
	return g, nil
}

// each reads a gate's each: {apiVersion, kind, namespace?, selector?,
// key}: the kind of the groups, which of its objects, and the CEL string
// expression that names, on each object of the gate, its group (an
// object's name).
func (w walker) each(n *yaml.Node, field string) (*health.Each, error) {
	f, err := w.Fields(n, field, "apiVersion", "kind", "namespace", "selector", "key")
	if err != nil {
		return nil, err
	}
	e := &health.Each{}
	if e.APIVersion, e.Kind, e.Namespace, e.Selector, err = w.objects(f, "longhorn.io/v1beta2", "Node"); err != nil {
		return nil, err
	}
	src, kn, err := w.ReqString(f, "key")
	if err != nil {
		return nil, err
	}
	if e.Key, err = health.CompileString(src); err != nil {
		return nil, w.Failf(kn, f.Path("key"), "the CEL expression %q does not compile to a string, the name of an object of %s (the variables are metadata, spec, status, values and version): %v", src, e.Kind, err)
	}
	return e, nil
}

// objects reads the objects a gate or its each names: apiVersion and
// kind (required), namespace and label selector (optional); apiExample
// and kindExample are what the errors give as examples.
func (w walker) objects(f *yamlfile.Fields, apiExample, kindExample string) (apiVersion, kind, namespace string, selector labels.Selector, err error) {
	var vn *yaml.Node
	if apiVersion, vn, err = w.ReqString(f, "apiVersion"); err != nil {
		return
	}
	if gv, perr := schema.ParseGroupVersion(apiVersion); perr != nil || gv.Version == "" {
		return "", "", "", nil, w.Failf(vn, f.Path("apiVersion"), "want GROUP/VERSION (%s) or v1, not %q", apiExample, apiVersion)
	}
	if kind, vn, err = w.ReqString(f, "kind"); err != nil {
		return
	}
	if !kindName.MatchString(kind) {
		return "", "", "", nil, w.Failf(vn, f.Path("kind"), "want a kind as manifests spell it (%s), not %q", kindExample, kind)
	}
	if namespace, err = w.OptString(f, "namespace"); err != nil {
		return
	}
	if namespace != "" {
		if err = checkNamespace(namespace); err != nil {
			return "", "", "", nil, w.Fail(f.Get("namespace"), f.Path("namespace"), err)
		}
	}
	sel, err := w.OptString(f, "selector")
	if err != nil || sel == "" {
		return
	}
	if selector, err = health.ParseSelector(sel); err != nil {
		return "", "", "", nil, w.Fail(f.Get("selector"), f.Path("selector"), err)
	}
	return
}

// celExpr compiles the CEL expression of field key (nil when optional and
// absent); CEL's own message says what is wrong.
func (w walker) celExpr(f *yamlfile.Fields, key string, required bool) (*health.Expr, error) {
	var src string
	var n *yaml.Node
	var err error
	if required {
		src, n, err = w.ReqString(f, key)
	} else if n = f.Get(key); n != nil {
		src, err = w.String(n, f.Path(key))
	}
	if err != nil || n == nil {
		return nil, err
	}
	e, err := health.Compile(src)
	if err != nil {
		return nil, w.Failf(n, f.Path(key), "the CEL expression %q does not compile (the variables are metadata, spec, status, values and version): %v", src, err)
	}
	return e, nil
}
