package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

// The values patches the baseline merges: by hand, the leaves the example
// policy decides for chart-upgrader (image tag, CPU limit, the default
// StorageClass), so both tools change the version and the values.
const (
	patchTo2 = `# demo-app 2.0.0: the new webhook tag, the new CPU limit, not the default StorageClass
webhook:
  image:
    tag: v0.5.6
resources:
  limits:
    cpu: "1"
storageClass:
  defaultStorageClass: false
`
	patchTo1 = `# demo-app 1.0.0: its webhook tag and CPU limit, not the default StorageClass
webhook:
  image:
    tag: v0.4.1
resources:
  limits:
    cpu: 500m
storageClass:
  defaultStorageClass: false
`
)

const (
	toolCU   = "chart-upgrader"
	toolBase = "baseline"
)

type upgradeFlags struct {
	chartUpgrader, baseline, kubectl, yq, out string
	runs, helmChartRuns, releaseRuns          int
	delay                                     time.Duration
	longDelays                                []time.Duration
	poll                                      int
	settle                                    string // chart-upgrader's --settle for a HelmChart and a release ("": its default)
}

func upgradeCommand(ctx context.Context, args []string, out, log io.Writer) error {
	var f upgradeFlags
	fs := flag.NewFlagSet("bench upgrade", flag.ContinueOnError)
	fs.SetOutput(log)
	fs.StringVar(&f.chartUpgrader, "chart-upgrader", "bin/chart-upgrader", "the chart-upgrader binary")
	fs.StringVar(&f.baseline, "baseline", "scripts/baseline-upgrade", "the baseline script")
	fs.StringVar(&f.kubectl, "kubectl", "kubectl", "the kubectl binary the baseline runs")
	fs.StringVar(&f.yq, "yq", "yq", "the yq binary the baseline runs")
	fs.IntVar(&f.runs, "runs", 20, "upgrades per tool")
	fs.IntVar(&f.helmChartRuns, "helmchart-runs", 10, "then upgrades of a k3s HelmChart through the real helm-controller (0: none)")
	fs.IntVar(&f.releaseRuns, "release-runs", 10, "then upgrades of a Helm release per tool, beside helm upgrade --reset-then-reuse-values --wait of Helm 3 (SDK) and 4 (CLI) (0: none)")
	fs.DurationVar(&f.delay, "delay", 3*time.Second, "the simulator's readiness delay after each Helm upgrade")
	fs.IntVar(&f.poll, "poll", 5, "the baseline's seconds between two looks")
	fs.StringVar(&f.settle, "settle", "", "chart-upgrader's --settle for the HelmChart and release upgrades (empty: its default, 10s)")
	var long string
	fs.StringVar(&long, "long-delays", "", "after the runs, one upgrade per tool at each of these delays (comma-separated)")
	fs.StringVar(&f.out, "out", "", "also write the table to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, d := range strings.Split(long, ",") {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		v, err := time.ParseDuration(d)
		if err != nil || v <= 0 {
			return fmt.Errorf("--long-delays: %q is not a positive duration", d)
		}
		f.longDelays = append(f.longDelays, v)
	}
	if f.runs < 2 {
		return fmt.Errorf("--runs must be at least 2, got %d", f.runs)
	}
	rep, err := benchUpgrade(ctx, f, log)
	if err != nil {
		return err
	}
	return rep.emit(out, f.out)
}

// sample is one measured upgrade.
type sample struct {
	tool, to string
	proc     proc
	ready    time.Time // the simulator's final ready status write
	req      requests
}

// settle is how long the simulator took from the tool's write to its final
// ready status write: Rancher, Fleet, the Helm upgrade, the delay.
func (s sample) settle() time.Duration { return s.ready.Sub(s.req.Applied) }

// overhead is the tool's own part of the wall time: the wall time minus
// settle. It covers starting, reading, deciding and writing before the
// apply, and noticing readiness, finishing and exiting after it.
func (s sample) overhead() time.Duration { return s.proc.Wall - s.settle() }

// check says whether the run is a valid measurement: it wrote the target,
// and the simulator reported ready after that write and before the run
// ended.
func (s sample) check() error {
	switch {
	case s.req.Applied.IsZero():
		return fmt.Errorf("%s → %s: no write of the managedchart in the audit log", s.tool, s.to)
	case !s.ready.After(s.req.Applied):
		return fmt.Errorf("%s → %s: %w", s.tool, s.to, errNoWait)
	case s.ready.After(s.proc.End):
		return fmt.Errorf("%s → %s: exited before the simulator reported ready", s.tool, s.to)
	}
	return nil
}

// side is the setup both tools share: the world, the chart, the inputs.
type side struct {
	f       upgradeFlags
	w       *world
	rel     release
	patches map[string]string // target version → the baseline's values patch
	baseEnv []string
}

func benchUpgrade(ctx context.Context, f upgradeFlags, log io.Writer) (*report, error) {
	logf(log, "starting the control plane and the Fleet simulator")
	w, err := startWorld(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	sd := &side{f: f, w: w, rel: release{name: "demo-app", releaseNS: "demo-system"}, patches: map[string]string{}}
	if err := w.deploy(ctx, sd.rel, 2*time.Minute); err != nil {
		return nil, err
	}
	for v, p := range map[string]string{"2.0.0": patchTo2, "1.0.0": patchTo1} {
		if sd.patches[v], err = w.file("patch-"+v+".yaml", p); err != nil {
			return nil, err
		}
	}
	sd.baseEnv = []string{"KUBECONFIG=" + w.env.KubeconfigPath(), "KUBECTL=" + f.kubectl, "YQ=" + f.yq,
		fmt.Sprintf("POLL=%d", f.poll), "KUBECACHEDIR=" + w.dir + "/kubectl-cache"}

	// Rounds of four keep both tools on the same footing, interleaved (drift
	// in the machine's load hits both) and in both directions.
	w.sim.SetFault(namespace, sd.rel.name, fleetsim.Fault{Delay: f.delay})
	round := []step{{toolCU, "2.0.0"}, {toolBase, "1.0.0"}, {toolBase, "2.0.0"}, {toolCU, "1.0.0"}}
	var samples []sample
	for i := 0; len(samples) < 2*f.runs; i++ {
		s, err := sd.run(ctx, round[i%len(round)])
		if err != nil {
			return nil, err
		}
		samples = append(samples, s)
		logf(log, "%2d/%d %-14s → %s  %s", len(samples), 2*f.runs, s.tool, s.to, secs(s.proc.Wall))
	}
	// Then one upgrade per tool at each longer delay: how requests grow
	// with the wait.
	long := map[time.Duration][]sample{}
	for _, d := range f.longDelays {
		w.sim.SetFault(namespace, sd.rel.name, fleetsim.Fault{Delay: d})
		for _, st := range []step{{toolCU, "2.0.0"}, {toolBase, "1.0.0"}} {
			s, err := sd.run(ctx, st)
			if err != nil {
				return nil, err
			}
			long[d] = append(long[d], s)
			logf(log, "delay %s: %-14s → %s  %s", d, s.tool, s.to, secs(s.proc.Wall))
		}
	}
	events, err := w.auditEvents()
	if err != nil {
		return nil, err
	}
	attributeAll := func(ss []sample) error {
		for i := range ss {
			s := &ss[i]
			agent := agentChartUpgrader
			if s.tool == toolBase {
				agent = agentKubectl
			}
			s.req = attribute(events, agent, s.proc.Start, s.proc.End)
			if err := s.check(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := attributeAll(samples); err != nil {
		return nil, err
	}
	for _, ss := range long {
		if err := attributeAll(ss); err != nil {
			return nil, err
		}
	}
	r := upgradeReport(f, samples)
	if len(f.longDelays) > 0 {
		longReport(r, f, samples, long)
	}
	w.stop() // the HelmChart part runs on a control plane of its own
	if f.helmChartRuns > 0 {
		f.runs = f.helmChartRuns
		hc, err := benchHelmChart(ctx, f, log)
		if err != nil {
			return nil, err
		}
		helmChartReport(r, f, samples, hc)
	}
	if f.releaseRuns > 0 {
		f.runs = f.releaseRuns
		rel, err := benchRelease(ctx, f, log)
		if err != nil {
			return nil, err
		}
		releaseReport(r, f, rel)
	}
	return r, nil
}

// step is one upgrade: which tool, to which version.
type step struct{ tool, to string }

// run runs one upgrade as a separate process and measures it; the
// requests are attributed later, from the audit log.
func (sd *side) run(ctx context.Context, st step) (sample, error) {
	from, err := sd.w.version(ctx, sd.rel)
	if err != nil {
		return sample{}, err
	}
	var p proc
	switch st.tool {
	case toolCU:
		p, err = runProc(ctx, nil, sd.f.chartUpgrader, sd.w.upgradeArgs(sd.rel, st.to, st.to < from, 10*time.Minute)...)
	default:
		p, err = runProc(ctx, sd.baseEnv, sd.f.baseline, namespace, sd.rel.name, st.to, sd.patches[st.to])
	}
	if err != nil {
		return sample{}, err
	}
	if err := p.ok(st.tool + " " + from + " → " + st.to); err != nil {
		return sample{}, err
	}
	return sample{tool: st.tool, to: st.to, proc: p, ready: sd.w.sim.LastStatusWrite(namespace, sd.rel.name)}, nil
}

// longReport adds how the requests grow with the readiness delay.
func longReport(r *report, f upgradeFlags, samples []sample, long map[time.Duration][]sample) {
	r.line("")
	r.line("API requests per upgrade as the wait grows (the rows after the first: one upgrade per tool at that " +
		"delay, `LONG_DELAYS`):")
	r.line("")
	cu, base := statsOf(samples, toolCU), statsOf(samples, toolBase)
	rows := [][]string{{f.delay.String() + " (median)", itoa(median(cu.reqs)), itoa(median(base.reqs)),
		ratio(float64(median(base.reqs)), float64(median(cu.reqs)))}}
	for _, d := range f.longDelays {
		var c, b int
		for _, s := range long[d] {
			if s.tool == toolCU {
				c = s.req.Total
			} else {
				b = s.req.Total
			}
		}
		rows = append(rows, []string{d.String(), itoa(c), itoa(b), ratio(float64(b), float64(c))})
	}
	r.table([]string{"readiness delay", "chart-upgrader", "baseline", "baseline ÷ chart-upgrader"}, rows)
}

// stats of one tool's samples.
type toolStats struct {
	n                      int
	wall, overhead, settle []time.Duration
	exit                   []time.Duration // the ready write → the process was reaped
	cpu                    []time.Duration
	rss                    []int64
	reqs                   []int
	total                  requests
}

func statsOf(samples []sample, tool string) toolStats {
	var t toolStats
	for _, s := range samples {
		if s.tool != tool {
			continue
		}
		t.n++
		t.wall = append(t.wall, s.proc.Wall)
		t.overhead = append(t.overhead, s.overhead())
		t.settle = append(t.settle, s.settle())
		t.exit = append(t.exit, s.proc.End.Sub(s.ready))
		t.cpu = append(t.cpu, s.proc.CPU)
		t.rss = append(t.rss, s.proc.MaxRSS)
		t.reqs = append(t.reqs, s.req.Total)
		t.total.add(s.req)
	}
	return t
}

func upgradeReport(f upgradeFlags, samples []sample) *report {
	cu, base := statsOf(samples, toolCU), statsOf(samples, toolBase)
	r := &report{}
	r.line("### Against a bash + kubectl + yq script")
	r.line("")
	r.line("`make bench-upgrade` (`scripts/bench-upgrade`, RUNS=%d): the same ManagedChart (demo-app, 1 cluster) upgraded "+
		"%d times by each tool, alternating 1.0.0 ⇄ 2.0.0 and interleaving the tools; the Fleet simulator holds readiness "+
		"back %s after each Helm upgrade. The baseline is `scripts/baseline-upgrade` (kubectl get -o yaml, yq edits, "+
		"kubectl apply, then kubectl get + sleep %d until Harvester's wait rule holds).", f.runs, f.runs, f.delay, f.poll)
	r.line("")
	r.machine()
	r.line("")
	row := func(name string, a, b string, c string) []string { return []string{name, a, b, c} }
	reqPer := func(t toolStats) float64 { return float64(t.total.Total) / float64(t.n) }
	r.table([]string{"per upgrade", "chart-upgrader", "baseline", "baseline ÷ chart-upgrader"}, [][]string{
		row("wall time, median", secs(median(cu.wall)), secs(median(base.wall)), ratio(median(base.wall).Seconds(), median(cu.wall).Seconds())),
		row("wall time, p90", secs(percentile(cu.wall, 90)), secs(percentile(base.wall, 90)), ratio(percentile(base.wall, 90).Seconds(), percentile(cu.wall, 90).Seconds())),
		row("of which Fleet (write → ready), median", secs(median(cu.settle)), secs(median(base.settle)), ""),
		row("**overhead** (wall − Fleet), median", secs(median(cu.overhead)), secs(median(base.overhead)), ratio(median(base.overhead).Seconds(), median(cu.overhead).Seconds())),
		row("overhead, p90", secs(percentile(cu.overhead, 90)), secs(percentile(base.overhead, 90)), ratio(percentile(base.overhead, 90).Seconds(), percentile(cu.overhead, 90).Seconds())),
		row("ready write → exit, median", millis(median(cu.exit)), millis(median(base.exit)), ratio(median(base.exit).Seconds(), median(cu.exit).Seconds())),
		row("CPU time (user+sys), median", millis(median(cu.cpu)), millis(median(base.cpu)), ratio(median(base.cpu).Seconds(), median(cu.cpu).Seconds())),
		row("CPU time, p90", millis(percentile(cu.cpu, 90)), millis(percentile(base.cpu, 90)), ratio(percentile(base.cpu, 90).Seconds(), percentile(cu.cpu, 90).Seconds())),
		row("peak RSS, median (max)", mb(median(cu.rss))+" ("+mb(maxOf(cu.rss))+")", mb(median(base.rss))+" ("+mb(maxOf(base.rss))+")", ""),
		row("**API requests**, median (p90)", fmt.Sprintf("%d (%d)", median(cu.reqs), percentile(cu.reqs, 90)),
			fmt.Sprintf("%d (%d)", median(base.reqs), percentile(base.reqs, 90)), ratio(reqPer(base), reqPer(cu))),
	})
	r.line("")
	per := func(t toolStats) string {
		avg := requests{ByVerb: map[string]int{}, ByKind: map[string]int{}}
		for k, v := range t.total.ByKind {
			avg.ByKind[k] = (v + t.n/2) / t.n
		}
		return avg.kinds()
	}
	r.line("API requests per upgrade (mean, by verb and resource), from the kube-apiserver audit log:")
	r.line("")
	r.line("- chart-upgrader: %s", per(cu))
	r.line("- baseline: %s", per(base))
	r.line("")
	r.line("Overhead = wall time − (the simulator's final ready status write − the API server's answer to the tool's " +
		"write of the ManagedChart), both from the same clock: what the tool adds to Fleet's own time. CPU time and peak " +
		"RSS come from wait4's rusage of the process (for the baseline: bash and every kubectl and yq it ran; the RSS " +
		"is the largest single process). Requests are counted in the audit log by user agent (`chart-upgrader`, " +
		"`kubectl/…`) within the run's time window, one policy for both (every request at Metadata level); " +
		"kubectl keeps its discovery cache warm across the baseline's runs.")
	return r
}
