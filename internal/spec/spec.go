package spec

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// walker walks the yaml.Node tree of one file with the strict checks of
// package yamlfile, which locate its errors, knowing the target kinds.
type walker struct {
	yamlfile.File
	kinds kind.Set
}

// The apiVersion and kind an upgrade spec must declare.
const (
	APIVersion = "chart-upgrader.io/v1alpha1"
	Kind       = "UpgradeSpec"
)

// DefaultWaitTimeout is how long the wait phase waits when a chart entry
// gives no wait.timeout.
const DefaultWaitTimeout = 20 * time.Minute

// DefaultFailureGrace is how long a terminal failure may last before the
// wait gives up on it (wait.errAppliedGrace): Fleet's agent retries a
// failed deployment with backoff, and one retry may succeed.
const DefaultFailureGrace = 60 * time.Second

// DefaultPodFailureGrace is how long a container of the new revision may
// fail to start (ImagePullBackOff, CrashLoopBackOff, …) before the wait
// gives up on it (wait.podFailureGrace): long enough for a first pull
// that fails and is retried, a crash or two at start, a ConfigMap made a
// moment later.
const DefaultPodFailureGrace = 2 * time.Minute

// DefaultSettle is how long the target must stay ready, its pods
// watched, before an upgrade is done (wait.settle). A container without a
// readiness probe is Ready the moment it starts, so a crash loop looks
// available between two crashes; most containers that crash at start
// (a configuration that does not parse, a file or a service missing) do
// so within seconds. 10 s catches those for 10 s more per upgrade; a
// chart whose containers take longer to fail sets more.
const DefaultSettle = 10 * time.Second

// Spec is a parsed upgrade spec (docs/design.md §6).
type Spec struct {
	File   string  // the file it was read from, as given
	Charts []Chart // upgraded one after another, in this order; never empty
}

// Chart is one entry of a spec: a target and how to upgrade it.
type Chart struct {
	Target     Target
	Chart      ChartRef
	Rules      []values.Rule
	Migrations []values.Migration
	Wait       Wait
	// Apply is how the upgrade is applied (apply:); kind.DefaultApply
	// when the entry gives none.
	Apply kind.Apply
	// Options are the target kind's own options (kind.Options), as its
	// adapter reads them; the kind's defaults when the entry gives none,
	// nil for a kind that takes none.
	Options any
	// Images is how preflight checks the images (images:).
	Images Images
}

// ChartRef says where the new chart comes from.
type ChartRef struct {
	Name   string // chart name
	Source string // a directory of .tgz files or chart dirs, or an http(s) Helm repo URL
}

// Wait bounds the wait phase of one chart.
type Wait struct {
	Timeout time.Duration // > 0; DefaultWaitTimeout when not given
	// FailureGrace is how long the target may report a terminal failure
	// of what was applied (Fleet's ErrApplied, Rancher's Defined=False)
	// before the wait gives up with exit 1 (> 0; DefaultFailureGrace).
	FailureGrace time.Duration
	// Health are the gates the upgrade waits for after the target is
	// ready (wait.health), in the spec's order.
	Health []health.Gate
	// PodFailureGrace is how long a container of the new revision may
	// fail to start before the wait gives up with exit 1 (0: never;
	// DefaultPodFailureGrace when not given).
	PodFailureGrace time.Duration
	// Settle is how long the target must stay ready before the upgrade is
	// done; a container of the new revision that crashes meanwhile fails
	// it (0: off; DefaultSettle when not given; only where the pods are
	// watched).
	Settle time.Duration
}

// ParseSpec parses an upgrade spec whose targets are of kinds; file names
// the input in errors and is kept in Spec.File. The spec must declare
// APIVersion and Kind and list at least one chart; no target may appear
// twice. Errors are bad input and follow the package format.
func ParseSpec(file string, data []byte, kinds kind.Set) (*Spec, error) {
	w := walker{yamlfile.File{Name: file}, kinds}
	root, err := w.Parse(data, fmt.Sprintf("empty upgrade spec (want apiVersion: %s, kind: %s and charts)", APIVersion, Kind))
	if err != nil {
		return nil, err
	}
	// Say what the file is meant to be before complaining about its fields.
	if err := w.header(root); err != nil {
		return nil, err
	}
	f, err := w.Fields(root, "", "apiVersion", "kind", "charts")
	if err != nil {
		return nil, err
	}
	n, err := w.Required(f, "charts")
	if err != nil {
		return nil, err
	}
	items, err := w.Sequence(n, "charts")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, w.Failf(n, "charts", "no charts listed (want at least one)")
	}
	s := &Spec{File: file}
	seen := map[Target]int{} // target → index
	for i, item := range items {
		c, err := w.chart(item, yamlfile.Index("charts", i))
		if err != nil {
			return nil, err
		}
		if j, ok := seen[c.Target]; ok {
			return nil, w.Failf(item, yamlfile.Index("charts", i)+".target",
				"duplicate target %s (also charts[%d], line %d)", c.Target, j+1, items[j].Line)
		}
		seen[c.Target] = i
		s.Charts = append(s.Charts, c)
	}
	return s, nil
}

// LoadSpec reads and parses the upgrade spec at path. A file that cannot be
// read is bad input naming the path.
//
// A chart source that is a relative directory is taken relative to the
// spec file's directory, so a spec and its charts can travel together.
func LoadSpec(path string, kinds kind.Set) (*Spec, error) {
	data, err := yamlfile.Read(path, "upgrade spec")
	if err != nil {
		return nil, err
	}
	sp, err := ParseSpec(yamlfile.Name(path), data, kinds)
	if err != nil {
		return nil, err
	}
	for i := range sp.Charts {
		src := sp.Charts[i].Chart.Source
		if src != "" && !strings.Contains(src, "://") && !filepath.IsAbs(src) {
			sp.Charts[i].Chart.Source = filepath.Join(filepath.Dir(path), src)
		}
	}
	return sp, nil
}

// header checks apiVersion and kind of the root mapping.
func (w walker) header(root *yaml.Node) error {
	f, err := w.Entries(root, "")
	if err != nil {
		return err
	}
	want := map[string]string{"apiVersion": APIVersion, "kind": Kind}
	for _, key := range []string{"apiVersion", "kind"} {
		v := f.Get(key)
		if v == nil {
			return w.Failf(root, "", "missing required field %q (want %s: %s)", key, key, want[key])
		}
		s, err := w.String(v, key)
		if err != nil {
			return err
		}
		if s != want[key] {
			return w.Failf(v, key, "unsupported %s %q (want %s)", key, s, want[key])
		}
	}
	return nil
}

func (w walker) chart(n *yaml.Node, field string) (Chart, error) {
	allowed := append([]string{"target", "chart", "rules", "migrations", "wait", "apply", "images"}, w.kinds.OptionFields()...)
	f, err := w.Fields(n, field, allowed...)
	if err != nil {
		return Chart{}, err
	}
	var c Chart
	tn, err := w.Required(f, "target")
	if err != nil {
		return Chart{}, err
	}
	var k kind.Descriptor
	if c.Target, k, err = w.target(tn, f.Path("target")); err != nil {
		return Chart{}, err
	}
	cn := f.Get("chart")
	if cn == nil && !k.OwnSource {
		if _, err := w.Required(f, "chart"); err != nil {
			return Chart{}, err
		}
	}
	if cn != nil {
		if c.Chart, err = w.chartRef(cn, f.Path("chart"), k.OwnSource); err != nil {
			return Chart{}, err
		}
	}
	if c.Rules, err = w.rules(f.Get("rules"), f.Path("rules")); err != nil {
		return Chart{}, err
	}
	if c.Migrations, err = w.migrations(f.Get("migrations"), f.Path("migrations")); err != nil {
		return Chart{}, err
	}
	if c.Wait, err = w.wait(f.Get("wait"), f.Path("wait")); err != nil {
		return Chart{}, err
	}
	if c.Apply, err = w.apply(f.Get("apply"), f.Path("apply"), k); err != nil {
		return Chart{}, err
	}
	if c.Options, err = w.options(f, k); err != nil {
		return Chart{}, err
	}
	if c.Images, err = w.images(f.Get("images"), f.Path("images")); err != nil {
		return Chart{}, err
	}
	return c, nil
}

// options reads the kind's own options (its field, parsed by the kind), or
// gives its defaults; another kind's options field is refused.
func (w walker) options(f *yamlfile.Fields, k kind.Descriptor) (any, error) {
	for _, name := range w.kinds.OptionFields() {
		n := f.Get(name)
		if n == nil || (k.Options != nil && name == k.Options.Field) {
			continue
		}
		owner, _ := w.kinds.OwnerOf(name)
		return nil, w.Failf(n, f.Path(name), "only a target of kind %s takes %s options (this one is a %s)", owner.Spelling, name, k.Spelling)
	}
	if k.Options == nil {
		return nil, nil
	}
	if n := f.Get(k.Options.Field); n != nil {
		return k.Options.Parse(w.File, n, f.Path(k.Options.Field))
	}
	return k.Options.Default(), nil
}

func (w walker) target(n *yaml.Node, field string) (Target, kind.Descriptor, error) {
	var t Target
	f, err := w.Fields(n, field, "kind", "namespace", "name")
	if err != nil {
		return t, kind.Descriptor{}, err
	}
	name, kn, err := w.ReqString(f, "kind")
	if err != nil {
		return t, kind.Descriptor{}, err
	}
	if t.Kind, err = targetKind(name, w.kinds); err != nil {
		return t, kind.Descriptor{}, w.Fail(kn, f.Path("kind"), err)
	}
	k, _ := w.kinds.Lookup(t.Kind)
	var vn *yaml.Node
	if t.Namespace, vn, err = w.ReqString(f, "namespace"); err != nil {
		return t, k, err
	}
	if err := checkNamespace(t.Namespace); err != nil {
		return t, k, w.Fail(vn, f.Path("namespace"), err)
	}
	if t.Name, vn, err = w.ReqString(f, "name"); err != nil {
		return t, k, err
	}
	if err := checkName(t.Name); err != nil {
		return t, k, w.Fail(vn, f.Path("name"), err)
	}
	return t, k, nil
}

// chartRef reads chart: {name, source}. With own (a kind whose object
// names its chart and source), both may be left out.
func (w walker) chartRef(n *yaml.Node, field string, own bool) (ChartRef, error) {
	f, err := w.Fields(n, field, "name", "source")
	if err != nil {
		return ChartRef{}, err
	}
	var c ChartRef
	if own {
		if c.Name, err = w.OptString(f, "name"); err != nil {
			return ChartRef{}, err
		}
		if c.Source, err = w.OptString(f, "source"); err != nil {
			return ChartRef{}, err
		}
		if c.Source == "" {
			return c, nil
		}
	} else if c.Name, _, err = w.ReqString(f, "name"); err != nil {
		return ChartRef{}, err
	}
	sn := f.Get("source")
	if !own {
		if c.Source, sn, err = w.ReqString(f, "source"); err != nil {
			return ChartRef{}, err
		}
	}
	if strings.Contains(c.Source, "://") {
		u, err := url.Parse(c.Source)
		if err != nil {
			return ChartRef{}, w.Fail(sn, f.Path("source"), fmt.Errorf("bad repository URL: %w", err))
		}
		if (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") || u.Host == "" {
			return ChartRef{}, w.Failf(sn, f.Path("source"),
				"unsupported source %q (want a directory, an http(s) Helm repository URL or an oci:// registry)", c.Source)
		}
	}
	return c, nil
}

// apply reads apply: {serverSide: auto|true|false, forceConflicts: bool,
// unchecked: refuse|warn, recreate: [Kind/name|Kind/namespace/name…],
// crds: skip|create|createReplace|{policy, migrate}}; a
// setting the kind refuses is bad input saying why.
func (w walker) apply(n *yaml.Node, field string, k kind.Descriptor) (kind.Apply, error) {
	out := kind.DefaultApply
	if n == nil {
		return out, nil
	}
	f, err := w.Fields(n, field, "serverSide", "forceConflicts", "unchecked", "recreate", "crds")
	if err != nil {
		return out, err
	}
	if sn := f.Get("serverSide"); sn != nil {
		var s string
		if sn.Kind == yaml.ScalarNode && (sn.Tag == "!!str" || sn.Tag == "!!bool") {
			s = strings.ToLower(sn.Value)
		}
		switch s {
		case kind.ServerSideAuto, kind.ServerSideTrue, kind.ServerSideFalse:
			out.ServerSide = s
		default:
			got := yamlfile.Describe(sn)
			if sn.Kind == yaml.ScalarNode {
				got = strconv.Quote(sn.Value)
			}
			return out, w.Failf(sn, f.Path("serverSide"), "want auto, true or false, not %s", got)
		}
		if why := k.Apply.ServerSideRefused; why != "" && s != kind.ServerSideAuto {
			return out, w.Failf(sn, f.Path("serverSide"), "a %s takes only auto: %s", k.Spelling, why)
		}
	}
	if fn := f.Get("forceConflicts"); fn != nil {
		if out.ForceConflicts, err = w.Bool(fn, f.Path("forceConflicts")); err != nil {
			return out, err
		}
		if why := k.Apply.ForceConflictsRefused; why != "" && out.ForceConflicts {
			return out, w.Failf(fn, f.Path("forceConflicts"), "a %s cannot force conflicts: %s", k.Spelling, why)
		}
	}
	if un := f.Get("unchecked"); un != nil {
		switch {
		case un.Kind == yaml.ScalarNode && un.Value == "refuse":
		case un.Kind == yaml.ScalarNode && un.Value == "warn":
			out.WarnUnchecked = true
		default:
			return out, w.Failf(un, f.Path("unchecked"), "want refuse or warn, not %s", yamlfile.Describe(un))
		}
	}
	if cn := f.Get("crds"); cn != nil {
		if out.CRDs, out.MigrateCRDs, err = w.crds(cn, f.Path("crds")); err != nil {
			return out, err
		}
	}
	if rn := f.Get("recreate"); rn != nil {
		if out.Recreate, err = w.recreate(rn, f.Path("recreate")); err != nil {
			return out, err
		}
	}
	if out.ForceConflicts && out.ServerSide == kind.ServerSideFalse {
		return out, w.Failf(n, field, "forceConflicts: true needs server-side apply, and serverSide is false")
	}
	return out, nil
}

// crds reads apply.crds: a policy word, or {policy: WORD, migrate: bool};
// migrate needs createReplace. skip is "".
func (w walker) crds(n *yaml.Node, field string) (policy string, migrate bool, err error) {
	pn, path := n, field
	if n.Kind == yaml.MappingNode {
		f, err := w.Fields(n, field, "policy", "migrate")
		if err != nil {
			return "", false, err
		}
		if pn = f.Get("policy"); pn == nil {
			return "", false, w.Failf(n, field, "want policy: skip, create or createReplace")
		}
		path = f.Path("policy")
		if mn := f.Get("migrate"); mn != nil {
			if migrate, err = w.Bool(mn, f.Path("migrate")); err != nil {
				return "", false, err
			}
		}
	}
	words := kind.CRDPolicies
	if pn.Kind != yaml.ScalarNode || pn.Tag != "!!str" || !slices.Contains(words, pn.Value) {
		got := yamlfile.Describe(pn)
		if pn.Kind == yaml.ScalarNode {
			got = strconv.Quote(pn.Value)
		}
		return "", false, w.Failf(pn, path, "want %s, not %s", strings.Join(words, ", "), got)
	}
	if migrate && pn.Value != "createReplace" {
		return "", false, w.Failf(n, field, "migrate: true needs policy: createReplace (a migration is part of replacing a CRD), not %s", pn.Value)
	}
	if pn.Value == words[0] {
		return "", false, nil
	}
	return pn.Value, migrate, nil
}

// recreateEntry is one object of apply.recreate: a kind as manifests name
// it, then a name, with a namespace between them or not.
var recreateEntry = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*/([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// recreate reads apply.recreate: a list of Kind/name (or
// Kind/namespace/name), each once.
func (w walker) recreate(n *yaml.Node, field string) ([]string, error) {
	items, err := w.Sequence(n, field)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, item := range items {
		at := fmt.Sprintf("%s[%d]", field, i+1)
		s, err := w.String(item, at)
		if err != nil {
			return nil, err
		}
		if !recreateEntry.MatchString(s) {
			return nil, w.Failf(item, at, "want KIND/NAME or KIND/NAMESPACE/NAME, the kind as the chart's manifest names it (StatefulSet/db), not %q", s)
		}
		if slices.Contains(out, s) {
			return nil, w.Failf(item, at, "%s is listed twice", s)
		}
		out = append(out, s)
	}
	return out, nil
}

func (w walker) wait(n *yaml.Node, field string) (Wait, error) {
	out := Wait{Timeout: DefaultWaitTimeout, FailureGrace: DefaultFailureGrace, PodFailureGrace: DefaultPodFailureGrace, Settle: DefaultSettle}
	if n == nil {
		return out, nil
	}
	f, err := w.Fields(n, field, "timeout", "errAppliedGrace", "podFailureGrace", "settle", "health")
	if err != nil {
		return Wait{}, err
	}
	if hn := f.Get("health"); hn != nil {
		if out.Health, err = w.gates(hn, f.Path("health")); err != nil {
			return Wait{}, err
		}
	}
	if tn := f.Get("timeout"); tn != nil {
		if out.Timeout, err = w.Duration(tn, f.Path("timeout"), "20m or 1h30m"); err != nil {
			return Wait{}, err
		}
	}
	if gn := f.Get("errAppliedGrace"); gn != nil {
		if out.FailureGrace, err = w.Duration(gn, f.Path("errAppliedGrace"), "60s or 5m"); err != nil {
			return Wait{}, err
		}
	}
	if pn := f.Get("podFailureGrace"); pn != nil {
		if d, err := time.ParseDuration(pn.Value); pn.Value == "0" || (err == nil && d == 0) {
			out.PodFailureGrace = 0 // off: the pods are not watched
		} else if out.PodFailureGrace, err = w.Duration(pn, f.Path("podFailureGrace"), "2m or 30s (0: off)"); err != nil {
			return Wait{}, err
		}
	}
	if sn := f.Get("settle"); sn != nil {
		if d, err := time.ParseDuration(sn.Value); sn.Value == "0" || (err == nil && d == 0) {
			out.Settle = 0
		} else if out.Settle, err = w.Duration(sn, f.Path("settle"), "10s or 1m (0: off)"); err != nil {
			return Wait{}, err
		}
	}
	return out, nil
}
