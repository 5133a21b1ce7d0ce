package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// DriftOptions are the inputs of `drift`.
type DriftOptions struct {
	Kubeconfig  string
	Target      string // KIND/NAMESPACE/NAME
	ChartSource string // where the deployed version's chart is ("": the target's own)
	// Spec is an upgrade spec whose chart for the target names its chart
	// source and name, used when the flags do not give them.
	Spec      string
	ChartName string
	CAFile    string
	Log       *slog.Logger
}

// DriftOutput is what `drift` reports: each drifted field of the target's
// objects in values terms. A Secret's values are redacted.
type DriftOutput struct {
	Target  string               `json:"target"`
	Chart   string               `json:"chart"`
	Version string               `json:"version"`
	Fields  []upgrade.DriftField `json:"fields"`
	// Reported are the objects the target's controller reports changed
	// itself (Fleet's Modified, with its patch).
	Reported   []ReportedDrift `json:"reportedByController,omitempty"`
	Missing    []string        `json:"missing,omitempty"`
	NotChecked []string        `json:"notChecked,omitempty"`
	Note       string          `json:"note"`
	// Unread says why nothing could be compared (no release of the target
	// on this cluster, say).
	Unread string `json:"unread,omitempty"`
}

// ReportedDrift is one object a controller reports changed.
type ReportedDrift struct {
	Object string `json:"object"`
	Patch  string `json:"patch"`
}

// Drift reads the target and compares its objects live with what its
// deployed revision rendered, each drifted field read back against the
// chart of the deployed version (from the chart source, or the one the
// target holds). It reads only. A target that does not exist is bad input.
func Drift(ctx context.Context, o DriftOptions) (*DriftOutput, error) {
	log, _ := logAndOut(o.Log, nil)
	t, err := spec.ParseTarget(o.Target, targets.Kinds())
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("--target: %w", err))
	}
	clients, err := connect(ctx, o.Kubeconfig, log)
	if err != nil {
		return nil, err
	}
	tg, _, err := openTarget(ctx, clients, t, nil, kind.DefaultApply)
	if err != nil {
		return nil, err
	}
	tg = wrapTarget(ctx, tg)
	d, ok := tg.(upgrade.Drifter)
	if !ok {
		return nil, outcome.BadInput(fmt.Errorf("--target %s: a %s cannot be compared with what it deployed", t, t.Kind))
	}
	obs, err := tg.Read(ctx)
	if err != nil {
		return nil, err
	}
	if obs == nil {
		return nil, outcome.BadInput(fmt.Errorf("--target %s: not found: check the kind, namespace and name", t))
	}
	if err := o.fromSpec(t); err != nil {
		return nil, err
	}
	name := o.ChartName
	if name == "" {
		name = obs.Chart
	}
	deployed, note, err := deployedChart(ctx, tg, o, name, obs.Version, rendererOf(clients))
	if err != nil {
		return nil, err
	}
	rep, err := d.Drift(ctx, obs, deployed)
	if err != nil {
		return nil, err
	}
	out := &DriftOutput{Target: t.String(), Chart: name, Version: obs.Version, Fields: rep.Fields, Missing: rep.Missing,
		NotChecked: rep.NotChecked, Note: joinNotes(note, rep.Note), Unread: rep.Unread}
	if out.Fields == nil {
		out.Fields = []upgrade.DriftField{}
	}
	for _, r := range rep.Reported {
		patch := r.Patch
		if r.Object.IsSecret() || values.LooksSecret(patch) {
			patch = provenance.Redacted
		}
		out.Reported = append(out.Reported, ReportedDrift{Object: r.Object.String(), Patch: patch})
	}
	return out, nil
}

// fromSpec fills the chart source and name the flags leave empty from
// the spec's chart for t. A spec that does not parse, or has no chart
// for t, is bad input.
func (o *DriftOptions) fromSpec(t spec.Target) error {
	if o.Spec == "" {
		return nil
	}
	sp, err := spec.LoadSpec(o.Spec, targets.Kinds())
	if err != nil {
		return fmt.Errorf("--spec: %w", err)
	}
	for _, c := range sp.Charts {
		if c.Target != t {
			continue
		}
		if o.ChartSource == "" {
			o.ChartSource = c.Chart.Source
		}
		if o.ChartName == "" {
			o.ChartName = c.Chart.Name
		}
		return nil
	}
	return outcome.BadInput(fmt.Errorf("--spec %s: no chart has target %s", o.Spec, t))
}

// noChart is the note of a drift made with no chart at hand.
const noChart = "compared with the release's stored manifest, as helm-diff compares; each row without its values: give --chart-source (or --spec with a chart for this target) holding the deployed version for values terms"

// deployedChart is the chart of the deployed version: the one the target
// holds (a release's, a HelmChart's), unless --chart-source (or the
// spec's source) is given; else the chart source's. Helm's release record
// keeps a chart without its subcharts: a held chart that lists
// dependencies is read from the source instead, and the note says so.
// With no chart at hand (no source names it, or the only one is such a
// record), it is nil, and the note says how to get values terms: the
// drift compares the live objects with the stored manifest alone.
func deployedChart(ctx context.Context, tg upgrade.Target, o DriftOptions, name, version string, r chartpkg.Renderer) (*upgrade.Chart, string, error) {
	lacking := "" // the held chart without its subcharts, when it is
	h, holder := tg.(chartHolder)
	if holder && o.ChartSource == "" {
		c, err := h.DeployedChart(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("%s: reading the deployed chart: %w", tg.Ref(), err)
		}
		if c != nil {
			if lacking = withoutSubcharts(c); lacking == "" {
				d, err := describe(c, r)
				return d, "", err
			}
			own, err := h.OwnSource(ctx)
			if err != nil {
				return nil, "", err
			}
			if own == nil {
				return nil, fmt.Sprintf("Helm's release record holds %s, and no chart source is given: %s", lacking, noChart), nil
			}
		}
	}
	if !holder && o.ChartSource == "" {
		return nil, "no chart source is given: " + noChart, nil
	}
	var src upgrade.ChartSource
	if o.ChartSource != "" {
		var err error
		if src, err = openSource(o.ChartSource, o.CAFile, r); err != nil {
			return nil, "", outcome.BadInput(fmt.Errorf("--chart-source: %w", err))
		}
	}
	src, err := targetSource(ctx, tg, src, r)
	if err != nil {
		return nil, "", err
	}
	c, err := src.Load(ctx, name, version)
	if err != nil {
		return nil, "", fmt.Errorf("loading chart %s %s, the deployed version, from %s: %w", name, version, src, err)
	}
	if lacking == "" {
		return c, "", nil
	}
	return c, fmt.Sprintf("the release record holds %s, as Helm stores it: read from %s", lacking, src), nil
}

// joinNotes joins the notes that are not empty.
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// WriteTable prints the report for people: one row per field, then what
// the controller reports and what was not compared.
func (d *DriftOutput) WriteTable(w io.Writer) error {
	head := fmt.Sprintf("%s: chart %s %s", d.Target, d.Chart, d.Version)
	if d.Note != "" {
		head += "; " + d.Note
	}
	fmt.Fprintln(w, head)
	switch {
	case d.Unread != "":
		fmt.Fprintf(w, "nothing compared: %s\n", d.Unread)
	case len(d.Fields) == 0:
		fmt.Fprintln(w, "no drift: every field is as the deployed revision rendered it, and no other manager owns one")
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "OBJECT\tFIELD\tMANAGER\tLIVE\tRENDERED\tVALUE\tTO KEEP THE LIVE VALUE")
		for _, f := range d.Fields {
			manager := strings.Join(f.Managers, ", ")
			if manager == "" {
				manager = "(none recorded)"
			}
			value, keep := f.Reading.Paths(), strings.Join(f.Reading.Rules, " ")
			switch {
			case !f.Reading.Mapped():
				value, keep = "-", "not adoptable: "+f.Reading.Reason
			case !f.Differs:
				keep = "nothing to change: the chart renders the live value"
			case len(f.Reading.Rules) == 0:
				keep = "no change of a value renders it (the live field is gone, or the chart now renders it otherwise than the deployed manifest)"
			case len(f.Reading.Set) > 0:
				keep += " (or " + strings.Join(f.Reading.Set, " ") + ")"
			}
			if len(f.Reading.AlsoChanges) > 0 && f.Differs {
				keep += "; that also changes " + strings.Join(f.Reading.AlsoChanges, ", ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Object, f.Field, manager, applycheck.Clip(f.Live), applycheck.Clip(f.Rendered), value, keep)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, r := range d.Reported {
		fmt.Fprintf(w, "reported changed by the target's controller: %s: %s\n", r.Object, r.Patch)
	}
	for _, m := range d.Missing {
		fmt.Fprintf(w, "missing from the cluster: %s\n", m)
	}
	for _, n := range d.NotChecked {
		fmt.Fprintf(w, "not compared: %s\n", n)
	}
	return nil
}
