package drainpredict

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Summary is the prediction in one line, for the termination log.
func (p *Prediction) Summary() string {
	if p.Finishes() {
		return fmt.Sprintf("the drain of node %s would finish: %d pod(s) evicted, %d warning(s)", p.Node, p.Evicted, len(p.Warnings))
	}
	return p.Err().Error()
}

// WriteText writes the prediction for people: a verdict line, then the
// blockers and the warnings as tables (rule, pod, owner, why, unblock),
// then what was not checked.
func (p *Prediction) WriteText(out io.Writer) error {
	var b strings.Builder
	if p.Finishes() {
		fmt.Fprintf(&b, "node/%s: the drain would finish: %d pod(s) to evict\n", p.Node, p.Evicted)
	} else {
		fmt.Fprintf(&b, "node/%s: the drain would NOT finish: %d blocker(s), %d pod(s) to evict\n", p.Node, len(p.Blockers), p.Evicted)
	}
	table := func(title string, fs []Finding) {
		if len(fs) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s:\n", title)
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tPOD\tOWNER\tWHY\tTO UNBLOCK")
		for _, f := range fs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Rule, dash(f.Pod), dash(f.Owner), f.Why, dash(f.Unblock))
		}
		tw.Flush()
	}
	table("BLOCKERS", p.Blockers)
	table("WARNINGS (the drain goes on)", p.Warnings)
	if len(p.NotChecked) > 0 {
		fmt.Fprintf(&b, "\nNOT CHECKED:\n")
		for _, n := range p.NotChecked {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// WriteJSON writes the prediction as one JSON document.
func (p *Prediction) WriteJSON(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
