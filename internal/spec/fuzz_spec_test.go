package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// FuzzParseSpec checks that ParseSpec never panics, that every error is bad
// input naming the file, and that an accepted spec keeps its promises: at
// least one chart, each target valid (its string form parses back to it) and
// listed once, a chart name and source, a positive wait timeout; and the same
// bytes parse the same way again.
func FuzzParseSpec(f *testing.F) {
	f.Add(designSpec)
	for _, seed := range []string{
		"",
		"apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts: []\n",
		"apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n- target: {kind: ManagedChart, namespace: a, name: b}\n  chart: {name: c, source: d}\n  wait: {timeout: 0s}\n",
		"apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n- &c\n  target: {kind: ManagedChart, namespace: a, name: b}\n  chart: {name: c, source: 'https://x/'}\n- *c\n",
		"apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n- {target: {kind: x, namespace: A, name: -}, chart: {name: c, source: 'ftp://x'}}\n",
		"apiVersion: v1\nkind: UpgradeSpec\n",
		"kind: UpgradeSpec\ncharts: {a: b}\n",
		"apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n- target: {kind: ManagedChart, namespace: a, name: b}\n  chart: {name: c, source: d}\n  rules: [{path: '**', policy: once}]\n  migrations: [{name: m, from: '<1', expr: 'del(.a'}]\n",
		"---\n---\napiVersion: chart-upgrader.io/v1alpha1\n",
		"<<: {apiVersion: chart-upgrader.io/v1alpha1}\nkind: UpgradeSpec\n",
		"\t\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("fuzz.yaml", data, kinds)
		if err != nil {
			if !errors.Is(err, outcome.ErrBadInput) {
				t.Fatalf("error is not bad input: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(s.Charts) == 0 {
			t.Fatal("a spec without charts was accepted")
		}
		seen := map[Target]bool{}
		for i, c := range s.Charts {
			back, err := ParseTarget(c.Target.String(), kinds)
			if err != nil || back != c.Target {
				t.Fatalf("charts[%d]: target %+v does not parse back from %q: %v", i+1, c.Target, c.Target.String(), err)
			}
			if seen[c.Target] {
				t.Fatalf("charts[%d]: target %s listed twice", i+1, c.Target)
			}
			seen[c.Target] = true
			if c.Chart.Name == "" || c.Chart.Source == "" {
				t.Fatalf("charts[%d]: chart %+v without a name or source", i+1, c.Chart)
			}
			if c.Wait.Timeout <= 0 {
				t.Fatalf("charts[%d]: wait timeout %s", i+1, c.Wait.Timeout)
			}
		}
		again, err := ParseSpec("fuzz.yaml", data, kinds)
		if err != nil || len(again.Charts) != len(s.Charts) {
			t.Fatalf("second parse differs: %v", err)
		}
	})
}
