package spec

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// walker walks the yaml.Node tree of one file with the strict checks of
// package yamlfile, which locate its errors.
type walker struct{ yamlfile.File }

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
	// Release holds the options of a Helm release target (kind Release).
	Release ReleaseOptions
}

// ReleaseOptions are the options of a chart entry of kind Release.
type ReleaseOptions struct {
	// RollbackOnFailure makes a Helm rollback to the revision the upgrade
	// started from when the upgrade fails or its wait times out (default
	// true).
	RollbackOnFailure bool
	// HistoryMax bounds the revisions Helm keeps, as helm upgrade
	// --history-max (default 10, Helm's; 0: no limit).
	HistoryMax int
}

// DefaultReleaseOptions are the options of a Release entry that gives none.
var DefaultReleaseOptions = ReleaseOptions{RollbackOnFailure: true, HistoryMax: 10}

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
}

// ParseSpec parses an upgrade spec; file names the input in errors and is
// kept in Spec.File. The spec must declare APIVersion and Kind and list at
// least one chart; no target may appear twice. Errors are bad input and
// follow the package format.
func ParseSpec(file string, data []byte) (*Spec, error) {
	w := walker{yamlfile.File{Name: file}}
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
func LoadSpec(path string) (*Spec, error) {
	data, err := yamlfile.Read(path, "upgrade spec")
	if err != nil {
		return nil, err
	}
	sp, err := ParseSpec(path, data)
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
	f, err := w.Fields(n, field, "target", "chart", "rules", "migrations", "wait", "release")
	if err != nil {
		return Chart{}, err
	}
	var c Chart
	tn, err := w.Required(f, "target")
	if err != nil {
		return Chart{}, err
	}
	if c.Target, err = w.target(tn, f.Path("target")); err != nil {
		return Chart{}, err
	}
	own := NamesOwnSource(c.Target.Kind)
	cn := f.Get("chart")
	if cn == nil && !own {
		if _, err := w.Required(f, "chart"); err != nil {
			return Chart{}, err
		}
	}
	if cn != nil {
		if c.Chart, err = w.chartRef(cn, f.Path("chart"), own); err != nil {
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
	if c.Release, err = w.release(f.Get("release"), f.Path("release"), c.Target.Kind); err != nil {
		return Chart{}, err
	}
	return c, nil
}

// release reads release: {rollbackOnFailure, historyMax}, which only a
// target of kind Release takes.
func (w walker) release(n *yaml.Node, field, kind string) (ReleaseOptions, error) {
	out := DefaultReleaseOptions
	if n == nil {
		return out, nil
	}
	if kind != KindRelease {
		return out, w.Failf(n, field, "only a target of kind %s takes release options (this one is a %s)", KindRelease, kind)
	}
	f, err := w.Fields(n, field, "rollbackOnFailure", "historyMax")
	if err != nil {
		return out, err
	}
	if b := f.Get("rollbackOnFailure"); b != nil {
		if out.RollbackOnFailure, err = w.Bool(b, f.Path("rollbackOnFailure")); err != nil {
			return out, err
		}
	}
	if h := f.Get("historyMax"); h != nil {
		var v int
		if h.Kind != yaml.ScalarNode || h.Tag != "!!int" || h.Decode(&v) != nil || v < 0 {
			return out, w.Failf(h, f.Path("historyMax"), "want a whole number ≥ 0, not %s", yamlfile.Describe(h))
		}
		out.HistoryMax = v
	}
	return out, nil
}

func (w walker) target(n *yaml.Node, field string) (Target, error) {
	f, err := w.Fields(n, field, "kind", "namespace", "name")
	if err != nil {
		return Target{}, err
	}
	var t Target
	kind, kn, err := w.ReqString(f, "kind")
	if err != nil {
		return Target{}, err
	}
	if t.Kind, err = targetKind(kind); err != nil {
		return Target{}, w.Fail(kn, f.Path("kind"), err)
	}
	var vn *yaml.Node
	if t.Namespace, vn, err = w.ReqString(f, "namespace"); err != nil {
		return Target{}, err
	}
	if err := checkNamespace(t.Namespace); err != nil {
		return Target{}, w.Fail(vn, f.Path("namespace"), err)
	}
	if t.Name, vn, err = w.ReqString(f, "name"); err != nil {
		return Target{}, err
	}
	if err := checkName(t.Name); err != nil {
		return Target{}, w.Fail(vn, f.Path("name"), err)
	}
	return t, nil
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

func (w walker) wait(n *yaml.Node, field string) (Wait, error) {
	out := Wait{Timeout: DefaultWaitTimeout, FailureGrace: DefaultFailureGrace}
	if n == nil {
		return out, nil
	}
	f, err := w.Fields(n, field, "timeout", "errAppliedGrace")
	if err != nil {
		return Wait{}, err
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
	return out, nil
}
