package kubecompat

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Summary is the verdict in one line, for the termination log.
func (r *Report) Summary() string {
	if err := r.Err(); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d release(s) checked against Kubernetes %s (%d rendered at it): none breaks", r.Checked, r.Target, r.Rendered)
}

// WriteText writes the report for people.
func (r *Report) WriteText(out io.Writer) error {
	var b strings.Builder
	if len(r.Failing) == 0 {
		fmt.Fprintf(&b, "Kubernetes %s (today %s): %d release(s) checked, %d rendered at %s: none breaks\n", r.Target, r.Current, r.Checked, r.Rendered, r.Target)
	} else {
		fmt.Fprintf(&b, "Kubernetes %s (today %s): %d of %d release(s) would break\n", r.Target, r.Current, len(r.Failing), r.Checked)
	}
	for _, f := range r.Failing {
		fmt.Fprintf(&b, "\nrelease %s (%s, chart %s): breaks %s\n", f.Release, f.Kind, f.Chart, f.When)
		for _, x := range f.Findings {
			fmt.Fprintf(&b, "  - %s: %s\n", x.What, x.Why)
		}
		if len(f.Appear) > 0 {
			fmt.Fprintf(&b, "  rendered at %s, these objects would appear: %s\n", r.Target, strings.Join(f.Appear, ", "))
		}
		if len(f.Disappear) > 0 {
			fmt.Fprintf(&b, "  rendered at %s, these objects would disappear: %s\n", r.Target, strings.Join(f.Disappear, ", "))
		}
		fmt.Fprintf(&b, "  way forward: %s\n", f.Forward)
	}
	for _, n := range r.NotChecked {
		fmt.Fprintf(&b, "not checked: %s\n", n)
	}
	fmt.Fprintf(&b, "removed APIs from %s\n", r.RemovalData)
	_, err := io.WriteString(out, b.String())
	return err
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
