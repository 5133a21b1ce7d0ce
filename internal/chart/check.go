package chart

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartvalues "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Release options Check renders with.
const (
	checkNamespace = "default"
	checkRevision  = 2 // an upgrade: there is a revision before it
)

// Check tells whether c installs with userValues as the complete user values
// of an upgrade, the way `helm template` would tell, offline: dependency
// conditions and tags are applied, the coalesced values are validated against
// the values.schema.json of the chart and of each enabled subchart, and the
// templates are rendered (release name = chart name, namespace "default",
// IsUpgrade, default capabilities; `lookup` finds nothing) and must give
// valid YAML.
//
// A schema or template failure is marked outcome.Refused and carries Helm's
// message. A chart that cannot be installed whatever the values (a library
// chart, a dependency missing from charts/) is marked outcome.BadInput.
// Check changes neither c nor userValues.
func Check(c *chart.Chart, userValues map[string]any) error {
	return Renderer{}.Check(c, userValues)
}

// Renderer renders charts for one cluster: with its capabilities (its
// Kubernetes version and served API versions, read from discovery once and
// only when a chart is first rendered: cluster.Clients.Capabilities), as
// Helm renders them when it installs or upgrades there, and the chart's
// kubeVersion checked against them as Helm checks it. The zero Renderer
// renders offline, with Helm's default capabilities, as `helm template`
// does, and checks no kubeVersion.
type Renderer struct {
	Capabilities func() (*common.Capabilities, error)
}

// Check is the package's Check, on r's cluster.
func (r Renderer) Check(c *chart.Chart, userValues map[string]any) error {
	_, err := r.render(c, userValues, "", checkNamespace, false)
	return err
}

// Manifest is the package's Manifest, on r's cluster.
func (r Renderer) Manifest(c *chart.Chart, userValues map[string]any, name, namespace string) (string, error) {
	ms, err := r.render(c, userValues, name, namespace, false)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return b.String(), nil
}

// Manifest renders c with userValues as Check does, as release name in
// namespace, and returns the objects Helm would apply (hooks and NOTES left
// out), as one YAML stream in Helm's install order. Errors are Check's.
func Manifest(c *chart.Chart, userValues map[string]any, name, namespace string) (string, error) {
	return Renderer{}.Manifest(c, userValues, name, namespace)
}

// render is Check's work: the chart's objects, as release name ("": the
// chart's name) in namespace. marked is a render of values marked for
// tracing (provenance.Mark): without the schema check (a marker is a
// string where the schema may want a number) and without NOTES.txt, which
// makes no object and whose checks (bitnami's `common.errors.insecureImages`
// fails on an image it does not know) would refuse every marker.
func (r Renderer) render(c *chart.Chart, userValues map[string]any, release, namespace string, marked bool) ([]releaseutil.Manifest, error) {
	ms, _, err := r.renderWithHooks(c, userValues, release, namespace, marked)
	return ms, err
}

// WithHooks renders c as Manifest does and returns the objects Helm would
// apply and, after them, its hooks' objects (in Helm's hook order), as
// one YAML stream: every object an upgrade makes, for the image check.
func (r Renderer) WithHooks(c *chart.Chart, userValues map[string]any, name, namespace string) (string, error) {
	objects, hooks, err := r.Rendered(c, userValues, name, namespace)
	return objects + hooks, err
}

// Rendered renders c once as Manifest does: the objects Helm would apply
// (Manifest's stream) and its hooks' objects (in Helm's hook order), as
// two YAML streams.
func (r Renderer) Rendered(c *chart.Chart, userValues map[string]any, name, namespace string) (objects, hooks string, err error) {
	ms, hs, err := r.renderWithHooks(c, userValues, name, namespace, false)
	if err != nil {
		return "", "", err
	}
	var b, h strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	for _, hk := range hs {
		fmt.Fprintf(&h, "---\n# Source: %s\n%s\n", hk.Path, hk.Manifest)
	}
	return b.String(), h.String(), nil
}

// renderWithHooks is render's work, the hooks kept.
func (r Renderer) renderWithHooks(c *chart.Chart, userValues map[string]any, release, namespace string, marked bool) ([]releaseutil.Manifest, []*helmrelease.Hook, error) {
	if c == nil || c.Metadata == nil {
		return nil, nil, outcome.BadInput(errors.New("checking chart: no chart"))
	}
	name := nameVersion(c)
	if c.Metadata.Type == "library" {
		return nil, nil, outcome.BadInput(fmt.Errorf("checking chart %s: a library chart cannot be installed", name))
	}
	if err := checkDependencies(c); err != nil {
		return nil, nil, outcome.BadInput(fmt.Errorf("checking chart %s: %w", name, err))
	}
	caps := common.DefaultCapabilities.Copy()
	if r.Capabilities != nil {
		var err error
		if caps, err = r.Capabilities(); err != nil {
			return nil, nil, fmt.Errorf("rendering chart %s as the cluster's Helm will: %w", name, err)
		}
		// as Helm's install and upgrade check it, in its words
		if kv := c.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
			return nil, nil, outcome.Refused(fmt.Errorf("chart %s requires kubeVersion: %s which is incompatible with Kubernetes %s", name, kv, caps.KubeVersion.Version))
		}
	}
	if err := checkSubchartTables(c, userValues); err != nil {
		return nil, nil, outcome.Refused(fmt.Errorf("checking the merged values against chart %s: %w", name, err))
	}

	cp := clone(c)
	if marked {
		dropNotes(cp)
	}
	vals := copyMap(userValues)
	if vals == nil {
		vals = map[string]any{}
	}
	if err := chartutil.ProcessDependencies(cp, vals); err != nil {
		return nil, nil, outcome.Refused(fmt.Errorf("processing the dependencies of chart %s with the merged values: %w", name, err))
	}
	if release == "" {
		release = c.Name()
	}
	opts := common.ReleaseOptions{
		Name:      release,
		Namespace: namespace,
		Revision:  checkRevision,
		IsUpgrade: true,
	}
	top, err := chartvalues.ToRenderValuesWithSchemaValidation(cp, vals, opts, caps, marked)
	if err != nil {
		return nil, nil, outcome.Refused(fmt.Errorf("validating the merged values against chart %s: %w", name, trimmed{err}))
	}
	var e engine.Engine // no client: lookup returns nothing, no DNS
	files, err := e.Render(cp, top)
	if err != nil {
		return nil, nil, outcome.Refused(fmt.Errorf("rendering chart %s with the merged values: %w", name, err))
	}
	for f := range files {
		if strings.HasSuffix(f, "NOTES.txt") {
			delete(files, f)
		}
	}
	hooks, ms, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, nil, outcome.Refused(fmt.Errorf("rendering chart %s with the merged values: %w", name, err))
	}
	return ms, hooks, nil
}

// dropNotes takes the NOTES.txt templates out of c (a clone) and its
// subcharts.
func dropNotes(c *chart.Chart) {
	c.Templates = slices.DeleteFunc(c.Templates, func(f *common.File) bool { return f != nil && path.Base(f.Name) == "NOTES.txt" })
	for _, d := range c.Dependencies() {
		dropNotes(d)
	}
}

// checkDependencies fails when Chart.yaml lists a dependency that charts/
// does not hold, as `helm install` does.
func checkDependencies(c *chart.Chart) error {
	if missing := MissingDependencies(c); len(missing) > 0 {
		return fmt.Errorf("listed in Chart.yaml but missing from charts/: %s", strings.Join(missing, ", "))
	}
	return nil
}

// MissingDependencies are the dependencies Chart.yaml lists that c does
// not hold, by name. Helm's release record stores a chart without its
// subcharts, so a deployed chart read back from it misses every one.
func MissingDependencies(c *chart.Chart) []string {
	if c == nil || c.Metadata == nil {
		return nil
	}
	var missing []string
	for _, d := range c.Metadata.Dependencies {
		if d == nil {
			continue
		}
		found := false
		for _, sub := range c.Dependencies() {
			if sub.Name() == d.Name {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, d.Name)
		}
	}
	return missing
}

// checkSubchartTables fails when the user values of a subchart (by name or
// alias) are not a map, which Helm reports obscurely.
func checkSubchartTables(c *chart.Chart, userValues map[string]any) error {
	names := map[string]bool{}
	for _, sub := range c.Dependencies() {
		names[sub.Name()] = true
	}
	for _, d := range c.Metadata.Dependencies {
		if d != nil && d.Alias != "" {
			names[d.Alias] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		v, ok := userValues[n]
		if _, isMap := v.(map[string]any); ok && v != nil && !isMap {
			return fmt.Errorf("the values of subchart %q must be a map, not %T", n, v)
		}
	}
	return nil
}

// trimmed drops the trailing newlines Helm ends its schema errors with.
type trimmed struct{ err error }

func (t trimmed) Error() string { return strings.TrimRight(t.err.Error(), "\n") }
func (t trimmed) Unwrap() error { return t.err }
