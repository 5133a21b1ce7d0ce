package values

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// cell width for values in the table
const cellWidth = 32

// WriteTable writes the decisions and warnings as aligned text: a summary
// line, one row per decision, then the warnings. Secret values are
// redacted; write it from any Result, redacted or not.
func (r *Result) WriteTable(w io.Writer) error {
	red := r.Redacted()
	if _, err := fmt.Fprintln(w, red.Summary()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tPOLICY\tACTION\tUSER\tOLD DEFAULT\tNEW DEFAULT\tRESULT\tREASON")
	for _, d := range red.Decisions {
		policy := string(d.Policy)
		if d.Rule > 0 {
			policy = fmt.Sprintf("%s #%d", d.Policy, d.Rule)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Path, policy, d.Action,
			cell(d.User), cell(d.Old), cell(d.New), cell(d.Result), d.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(red.Warnings) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nWARNINGS")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, wn := range red.Warnings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", wn.Kind, wn.Path, wn.Message)
	}
	return tw.Flush()
}

func cell(v Value) string {
	if !v.Set {
		return "-"
	}
	return Format(v.V, cellWidth)
}

// Summary is one line: versions, decision counts by action, warnings, hash.
func (r *Result) Summary() string {
	counts := map[Action]int{}
	for _, d := range r.Decisions {
		counts[d.Action]++
	}
	actions := make([]string, 0, len(counts))
	for a := range counts {
		actions = append(actions, string(a))
	}
	sort.Strings(actions)
	parts := make([]string, len(actions))
	for i, a := range actions {
		parts[i] = fmt.Sprintf("%d %s", counts[Action(a)], a)
	}
	from, to := r.From, r.To
	if from == "" {
		from = "?"
	}
	if to == "" {
		to = "?"
	}
	hash := r.SHA256
	if len(hash) > 12 {
		hash = hash[:12]
	}
	return fmt.Sprintf("merge %s → %s: %s (%s), %s, values sha256 %s",
		from, to, plural(len(r.Decisions), "decision"), strings.Join(parts, ", "), plural(len(r.Warnings), "warning"), hash)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
