package chart

import (
	"fmt"
	"slices"
	"strings"

	chartvalues "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Trace renders c with userValues as release name in namespace twice, as
// it is and with its effective values marked (provenance.Mark, without the
// schema check: a marker is a string where the schema may want a number;
// the values its templates test in a condition left as they are,
// conditionValues),
// and pairs the two: which values render which fields. A value whose
// marker the chart refuses (a number given to until, a version to
// semverCompare) is found (traceRefusing) and left unmarked; a chart
// that refuses more than MaxRefused gives a Map that says so for every
// field; one that does not render at all gives Manifest's error.
func Trace(c *chart.Chart, userValues map[string]any, name, namespace string) (*provenance.Map, error) {
	return Renderer{}.Trace(c, userValues, name, namespace)
}

// Trace is the package's Trace, on r's cluster.
func (r Renderer) Trace(c *chart.Chart, userValues map[string]any, name, namespace string) (*provenance.Map, error) {
	return r.trace(c, userValues, name, namespace, templateTestsCache{})
}

// trace is Trace with the templates' tests parsed into parsed, which the
// traces conditional probing makes of c share.
func (r Renderer) trace(c *chart.Chart, userValues map[string]any, name, namespace string, parsed templateTestsCache) (*provenance.Map, error) {
	real, err := r.render(c, userValues, name, namespace, false)
	if err != nil {
		return nil, err
	}
	effective, err := chartvalues.CoalesceValues(c, copyMap(userValues))
	if err != nil {
		return nil, fmt.Errorf("coalescing the values of chart %s: %w", nameVersion(c), err)
	}
	keepNulls(c, effective, nil)
	conditions := conditionValues(c, effective, parsed)
	marked, marks := provenance.Mark(effective, conditions...)
	traced, err := r.render(c, marked, name, namespace, true)
	if err != nil {
		// a template may refuse a marker (a number given to until or a
		// comparison, a version to semverCompare): find those values and
		// leave them unmarked
		if traced, marks, err = r.traceRefusing(c, effective, conditions, marks, err, name, namespace); err != nil {
			m, ferr := provenance.Failed(docs(real), fmt.Sprintf("the values cannot be traced: the chart does not render with each value marked (%s)", firstLine(marks.Unmark(err.Error()))), effective)
			if m != nil {
				m.CheckWith(r.renderer(c, name, namespace)) // probing still finds values by rendering
				fallbacks(m, c, namespace)
			}
			return m, ferr
		}
	}
	m, err := provenance.Trace(docs(real), docs(traced), marks, effective)
	if err != nil {
		return nil, err
	}
	// an answer is checked by rendering it, as Helm will
	m.CheckWith(r.renderer(c, name, namespace))
	fallbacks(m, c, namespace)
	// a field only another branch of a condition renders live is read
	// back through a trace with the value it tests set so
	m.RetraceWith(func(vals map[string]any) (*provenance.Map, error) { return r.trace(c, vals, name, namespace, parsed) },
		func() []provenance.Tested { return testedValues(c, effective, parsed) })
	return m, nil
}

// fallbacks tells m the texts c's templates write for an empty value, as
// Helm's own scaffold writes them: the release namespace for a
// namespace's override, the chart's appVersion (and each subchart's) for
// an image's tag or a version.
func fallbacks(m *provenance.Map, c *chart.Chart, namespace string) {
	m.FallsBackTo(namespace, "namespace")
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		if c.Metadata != nil {
			m.FallsBackTo(c.Metadata.AppVersion, "tag", "version")
		}
		for _, d := range c.Dependencies() {
			walk(d)
		}
	}
	walk(c)
}

// MaxRefused is how many values a chart may refuse a marker in before
// tracing gives up on it: each is found by bisection, in about log2 of
// the number of values renders.
const MaxRefused = 8

// traceRefusing finds the values whose markers make c fail to render
// (failure, with marks), one at a time by bisection over the values in
// marking order (Marks.Units: the first n marked fail, the first n-1
// render: the nth is refused), and renders c with all but those marked.
// With more than MaxRefused such values it gives up with failure; marks
// stay those of failure.
func (r Renderer) traceRefusing(c *chart.Chart, effective map[string]any, keep [][]string, marks *provenance.Marks, failure error, name, namespace string) ([]releaseutil.Manifest, *provenance.Marks, error) {
	units := marks.Units()
	keep = slices.Clone(keep)
	firstMarks := marks
	// markedUpTo renders c with the first n units marked
	markedUpTo := func(n int) ([]releaseutil.Manifest, *provenance.Marks, error) {
		marked, m := provenance.Mark(effective, append(slices.Clone(keep), units[n:]...)...)
		ms, err := r.render(c, marked, name, namespace, true)
		return ms, m, err
	}
	var refused []string
	for range MaxRefused {
		lo, hi := 0, len(units) // the first lo render, the first hi fail
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if _, _, err := markedUpTo(mid); err != nil {
				hi = mid
			} else {
				lo = mid
			}
		}
		if hi == 0 {
			break // with nothing marked it still fails: not a marker's doing
		}
		unit := units[hi-1]
		keep = append(keep, unit)
		refused = append(refused, provenance.PathString(provenance.StepsOf(unit)))
		units = slices.Delete(units, hi-1, hi)
		ms, m, err := markedUpTo(len(units))
		if err == nil {
			m.Refused(fmt.Sprintf("the chart refuses a marker in %s (%s), so %s not traced", strings.Join(refused, ", "), firstLine(firstMarks.Unmark(failure.Error())), map[bool]string{true: "it is", false: "they are"}[len(refused) == 1]))
			return ms, m, nil
		}
	}
	return nil, firstMarks, failure
}

// renderer renders c as release name in namespace with the values given.
func (r Renderer) renderer(c *chart.Chart, name, namespace string) provenance.Renderer {
	return func(vals map[string]any) ([]provenance.Doc, error) {
		ms, err := r.render(c, vals, name, namespace, false)
		return docs(ms), err
	}
}

// firstLine is the first line of a chart's error, cut to 200 bytes: a
// template's fail message can run to a page.
func firstLine(s string) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s, cut = s[:200], true
	}
	if cut {
		s += " …"
	}
	return s
}

func docs(ms []releaseutil.Manifest) []provenance.Doc {
	out := make([]provenance.Doc, len(ms))
	for i, m := range ms {
		out[i] = provenance.Doc{Source: m.Name, Content: m.Content}
	}
	return out
}

// keepNulls puts back into effective (c's effective values, under at)
// each key whose default in c's values, or a subchart's, is null and that
// no value set: Helm's coalescing drops such a key, a template reads it as
// null (a registry a helper defaults), and tracing marks it as it marks an
// empty string.
func keepNulls(c *chart.Chart, effective map[string]any, at []string) {
	var walk func(defaults, into map[string]any)
	walk = func(defaults, into map[string]any) {
		for k, v := range defaults {
			switch x := v.(type) {
			case nil:
				if _, set := into[k]; !set {
					into[k] = nil
				}
			case map[string]any:
				if sub, ok := into[k].(map[string]any); ok {
					walk(x, sub)
				}
			}
		}
	}
	if v, _ := values.Lookup(effective, at); v != nil {
		if into, ok := v.(map[string]any); ok {
			walk(c.Values, into)
		}
	}
	for _, d := range c.Dependencies() {
		keepNulls(d, effective, append(at[:len(at):len(at)], d.Name()))
	}
}
