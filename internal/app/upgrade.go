package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Upgrade runs `chart-upgrader upgrade`: each chart of the spec (or the one
// --target) is brought to the wanted version, one after another. It holds
// the host lock throughout (busy → outcome.ErrLockHeld). A re-run after
// success makes no write to the cluster and returns nil.
func Upgrade(ctx context.Context, opts Options) error {
	return runCharts(ctx, opts, upgrade.GoalUpgrade, "upgraded")
}

// Preflight runs resolve and preflight only: it makes no writes.
func Preflight(ctx context.Context, opts Options) error {
	return runCharts(ctx, opts, upgrade.GoalCheck, "preflight passed for")
}

func runCharts(ctx context.Context, opts Options, goal upgrade.Goal, verb string) (err error) {
	opts.defaults()
	var lines []string // one a chart, for the termination log
	defer func() {
		if len(lines) == 0 {
			lines = []string{verb}
		}
		host.WriteTerminationLines(opts.TerminationLog, lines, err, opts.Log)
	}()
	charts, specFile, err := planCharts(&opts)
	if err != nil {
		return err
	}
	if opts.HooksDir == "" && opts.SpecFile == "" && opts.Target == "" {
		// run by system-upgrade-controller: hooks travel with the spec
		opts.HooksDir = filepath.Dir(specFile)
	}
	if opts.Version == "" {
		opts.Version = os.Getenv(upgrade.LatestVersionEnv)
	}
	images, noImages, err := openImages(opts)
	if err != nil {
		return err
	}
	sess, err := openSession(ctx, opts.local(), opts.NodeName, opts.LeaseDuration)
	if err != nil {
		return err
	}
	defer sess.close()
	sess.images, sess.noImages = images, noImages
	if images != nil {
		defer images.Close()
	}
	runner := sess.runner(ctx, upgrade.Settings{Version: opts.Version, AllowDowngrade: opts.AllowDowngrade, Unpause: opts.Unpause,
		RequireNodesReady: opts.RequireNodesReady, LeaseDuration: opts.LeaseDuration, Heartbeat: opts.Heartbeat,
		Node: opts.NodeName, JobName: opts.SUC.String(), LeaseAnnotations: leaseAnnotations(opts.NodeName, opts.SUC),
		Log: opts.Log, Out: opts.Out})
	runner.Hooks = &host.Hooks{Dir: opts.HooksDir, Timeout: opts.HookTimeout, HostRoot: opts.HostRoot, Log: opts.Log}
	done := 0
	for _, c := range charts {
		job, err := sess.job(ctx, c, opts.CAFile, opts.Explicit, opts.Timeout, opts.PodFailureGrace, opts.Settle)
		if err != nil {
			return err
		}
		res, err := runner.Run(ctx, job, goal)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %s %s → %s", verb, c.Target, res.From, res.To)
		if goal == upgrade.GoalUpgrade && res.Situation == upgrade.SituationDone && !res.Leader {
			line = fmt.Sprintf("%s is at %s and ready: nothing to do", c.Target, res.To)
		}
		lines = append(lines, line)
		if goal == upgrade.GoalCheck && opts.Output == "json" {
			if err := writeChecked(opts.Out, c.Target.String(), res); err != nil {
				return err
			}
			done++
			continue
		}
		if goal == upgrade.GoalCheck && res.Merge != nil {
			// what preflight checked: the decisions and warnings an
			// upgrade now would make
			if err := res.Merge.WriteTable(opts.Out); err != nil {
				return err
			}
		}
		if goal == upgrade.GoalCheck && opts.Output == "diff" {
			writeChanges(opts.Out, res)
		}
		crdActions := res.CRDsApplied // what the apply did; preflight's verdicts when it applied nothing
		if goal == upgrade.GoalCheck {
			crdActions = res.CRDs
		}
		for _, a := range crdActions {
			fmt.Fprintf(opts.Out, "CRD %s\n", a)
		}
		for _, h := range res.HookFailures {
			fmt.Fprintf(opts.Out, "warning: %s\n", h)
		}
		if goal == upgrade.GoalCheck && res.Images != nil {
			fmt.Fprintln(opts.Out, res.Images.Note)
		}
		fmt.Fprintln(opts.Out, line)
		done++
	}
	opts.Log.Info("finished", "charts", done)
	return nil
}

// leaseAnnotations name the Job holding a Lease, for a person reading it.
func leaseAnnotations(node string, suc host.SUC) map[string]string {
	ann := map[string]string{}
	for k, v := range map[string]string{
		"chart-upgrader.io/node": node, "chart-upgrader.io/plan": suc.Plan,
		"chart-upgrader.io/plan-hash": suc.PlanHash, "chart-upgrader.io/pod": suc.Pod,
		"chart-upgrader.io/pod-uid": suc.PodUID,
	} {
		if v != "" {
			ann[k] = v
		}
	}
	return ann
}

// checked is preflight's -o json of one chart.
type checked struct {
	Target  string                 `json:"target"`
	From    string                 `json:"from"`
	To      string                 `json:"to"`
	Merge   *values.Result         `json:"merge,omitempty"`
	Changes []upgrade.ObjectChange `json:"changes"`
	// CRDs are the verdicts on the chart's CRDs (apply.crds).
	CRDs []upgrade.CRDAction `json:"crds,omitempty"`
	// Images is the image check: each image, where it was found, the
	// endpoints asked and the verdict; or why none was checked.
	Images *checkedImages `json:"images,omitempty"`
}

// checkedImages is the image check in -o json.
type checkedImages struct {
	Checked bool                  `json:"checked"`
	Note    string                `json:"note"`
	Images  []upgrade.ImageReport `json:"images"`
}

// writeChecked prints what preflight found for target as one JSON object:
// the decisions (redacted) and the change of each object.
func writeChecked(w io.Writer, target string, res *upgrade.Result) error {
	out := checked{Target: target, From: res.From, To: res.To, Changes: []upgrade.ObjectChange{}, CRDs: res.CRDs}
	if res.Merge != nil {
		out.Merge = res.Merge.RedactedValues()
	}
	if res.Changes != nil {
		out.Changes = res.Changes()
	}
	if res.Images != nil {
		out.Images = &checkedImages{Checked: res.Images.Checked, Note: res.Images.Note, Images: res.Images.Images}
		if out.Images.Images == nil {
			out.Images.Images = []upgrade.ImageReport{}
		}
	}
	return WriteObject(w, "json", out)
}

// writeChanges prints the change of each object an upgrade now would
// make, as unified diffs of the live object and the object after the
// apply; what preflight did not compute, it says so.
func writeChanges(w io.Writer, res *upgrade.Result) {
	if res.Changes == nil {
		fmt.Fprintln(w, "no object changes computed: the target applies nothing now")
		return
	}
	changes := res.Changes()
	if len(changes) == 0 {
		fmt.Fprintln(w, "the upgrade changes no object")
		return
	}
	for _, c := range changes {
		fmt.Fprintf(w, "%s: %s\n%s", c.Object, c.Action, c.Diff)
	}
}
