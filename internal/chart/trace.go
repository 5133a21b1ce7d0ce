package chart

import (
	"fmt"
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
// and pairs the two: which values render which fields. A chart that does
// not render with its numbers marked is traced by its strings alone; one
// that does not render with its strings marked either gives a Map that
// says so for every field; one that does not render at all gives
// Manifest's error.
func Trace(c *chart.Chart, userValues map[string]any, name, namespace string) (*provenance.Map, error) {
	return Renderer{}.Trace(c, userValues, name, namespace)
}

// Trace is the package's Trace, on r's cluster.
func (r Renderer) Trace(c *chart.Chart, userValues map[string]any, name, namespace string) (*provenance.Map, error) {
	real, err := r.render(c, userValues, name, namespace, false)
	if err != nil {
		return nil, err
	}
	effective, err := chartvalues.CoalesceValues(c, copyMap(userValues))
	if err != nil {
		return nil, fmt.Errorf("coalescing the values of chart %s: %w", nameVersion(c), err)
	}
	keepNulls(c, effective, nil)
	conditions := conditionValues(c, effective)
	marked, marks := provenance.Mark(effective, conditions...)
	traced, err := r.render(c, marked, name, namespace, true)
	if err != nil {
		// a template may want a number where a marker is text (until, a
		// comparison): try again with the strings alone marked
		marked, marks = provenance.MarkStrings(effective, fmt.Sprintf("with them marked, the chart does not render (%s)", firstLine(marks.Unmark(err.Error()))), conditions...)
		if traced, err = r.render(c, marked, name, namespace, true); err != nil {
			m, ferr := provenance.Failed(docs(real), fmt.Sprintf("the values cannot be traced: the chart does not render with each value marked (%s)", firstLine(marks.Unmark(err.Error()))), effective)
			if m != nil {
				m.CheckWith(r.renderer(c, name, namespace)) // probing still finds values by rendering
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
	return m, nil
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
