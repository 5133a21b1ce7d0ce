// Package helmflags compares, on the bundled example (demo-app 1.0.0 →
// 2.0.0 with the installer's values), what each of Helm's three upgrade
// flags would deploy with what chart-upgrader's policy decides, value by
// value: the table of docs/release.md, which a test keeps up to date.
//
// Each column is the values Helm renders the new chart with, worked out
// as Helm 3.22's upgrade action does (pkg/action/upgrade.go, reuseValues)
// and coalesced with Helm's chartutil:
//
//   - --reuse-values: the old release's values over the OLD chart's
//     defaults, which replace the new chart's: no new default reaches the
//     release;
//   - --reset-values: the new chart's defaults alone;
//   - --reset-then-reuse-values: the old release's values over the new
//     chart's defaults: every pin wins, nothing is decided;
//   - chart-upgrader: the merged values U' (the example policy, the live
//     objects of package/examples/live.yaml) over the new chart's
//     defaults.
package helmflags

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartvalues "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Table is the markdown table for the example in dir (package/examples).
func Table(ctx context.Context, dir string) (string, error) {
	old, err := loader.Load(filepath.Join(dir, "charts", "demo-app-1.0.0"))
	if err != nil {
		return "", err
	}
	newc, err := loader.Load(filepath.Join(dir, "charts", "demo-app-2.0.0"))
	if err != nil {
		return "", err
	}
	res, err := app.MergeOffline(ctx, app.MergeFiles{Values: filepath.Join(dir, "values.yaml"),
		Chart: filepath.Join(dir, "charts", "demo-app-2.0.0"), OldChart: filepath.Join(dir, "charts", "demo-app-1.0.0"),
		Policy: filepath.Join(dir, "policy.yaml"), Live: filepath.Join(dir, "live.yaml")})
	if err != nil {
		return "", err
	}
	user, err := common.ReadValuesFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return "", err
	}
	oldVals, err := chartvalues.CoalesceValues(old, user)
	if err != nil {
		return "", err
	}
	reuseChart := *newc
	reuseChart.Values = oldVals
	cols := []struct {
		name string
		vals func() (map[string]any, error)
	}{
		{"`--reuse-values`", func() (map[string]any, error) { return chartvalues.CoalesceValues(&reuseChart, user) }},
		{"`--reset-values`", func() (map[string]any, error) { return chartvalues.CoalesceValues(newc, map[string]any{}) }},
		{"`--reset-then-reuse-values`", func() (map[string]any, error) { return chartvalues.CoalesceValues(newc, user) }},
		{"chart-upgrader", func() (map[string]any, error) { return chartvalues.CoalesceValues(newc, res.Values) }},
	}
	leaves := make([]map[string]string, len(cols))
	paths := map[string]bool{}
	for i, c := range cols {
		v, err := c.vals()
		if err != nil {
			return "", err
		}
		leaves[i] = map[string]string{}
		flatten(v, "", leaves[i])
		for p := range leaves[i] {
			paths[p] = true
		}
	}
	reasons := map[string]string{}
	for _, d := range res.Decisions {
		reasons[d.Path] = d.Reason
	}
	var rows []string
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var b strings.Builder
	b.WriteString("| value | 1.0.0 default | 2.0.0 default | installer's | ")
	for _, c := range cols {
		b.WriteString(c.name + " | ")
	}
	b.WriteString("why chart-upgrader's |\n| --- | --- | --- | --- |")
	for range cols {
		b.WriteString(" --- |")
	}
	b.WriteString(" --- |\n")
	oldLeaves, newLeaves, userLeaves := map[string]string{}, map[string]string{}, map[string]string{}
	flatten(old.Values, "", oldLeaves)
	flatten(newc.Values, "", newLeaves)
	flatten(user, "", userLeaves)
	for _, p := range sorted {
		same := true
		for i := 1; i < len(cols); i++ {
			if leaves[i][p] != leaves[0][p] {
				same = false
			}
		}
		if same {
			continue // every way deploys the same value
		}
		row := []string{"`" + p + "`", cell(p, oldLeaves, false), cell(p, newLeaves, false), cell(p, userLeaves, false)}
		for i := range cols {
			row = append(row, cell(p, leaves[i], true))
		}
		row = append(row, strings.ReplaceAll(reasons[p], "|", "\\|"))
		rows = append(rows, "| "+strings.Join(row, " | ")+" |")
	}
	b.WriteString(strings.Join(rows, "\n"))
	b.WriteString("\n")
	return b.String(), nil
}

// cell shows the value at p, "–" when absent, a secret-looking one only
// as whether it is set (deployed: what the chart then does with it).
func cell(p string, leaves map[string]string, deployed bool) string {
	v, ok := leaves[p]
	switch {
	case !ok:
		return "–"
	case values.LooksSecret(p[strings.LastIndex(p, ".")+1:]):
		switch {
		case v == `""` && deployed:
			return "`\"\"`: generated again"
		case v == `""`:
			return "`\"\"`"
		}
		return "the installed one"
	}
	return "`" + strings.ReplaceAll(v, "|", "\\|") + "`"
}

// flatten records every leaf of v under its dotted path, formatted.
func flatten(v map[string]any, prefix string, out map[string]string) {
	for k, x := range v {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if m, ok := x.(map[string]any); ok && len(m) > 0 {
			flatten(m, p, out)
			continue
		}
		out[p] = format(x)
	}
}

func format(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return `""`
		}
		return x
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}
