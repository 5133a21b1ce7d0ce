package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
)

type scaleFlags struct {
	chartUpgrader, out string
	clusters           []int
	readyOverTime      time.Duration
	runs               int
	nodes              int
	charts             int
	chartDelay         time.Duration
}

func scaleCommand(ctx context.Context, args []string, out, log io.Writer) error {
	var f scaleFlags
	var clusters string
	fs := flag.NewFlagSet("bench scale", flag.ContinueOnError)
	fs.SetOutput(log)
	fs.StringVar(&f.chartUpgrader, "chart-upgrader", "bin/chart-upgrader", "the chart-upgrader binary")
	fs.StringVar(&clusters, "clusters", "1000,10000", "numbers of downstream clusters (BundleDeployments of the Bundle), comma-separated")
	fs.DurationVar(&f.readyOverTime, "ready-over", 10*time.Second, "the simulator makes the clusters ready one by one over this time")
	fs.IntVar(&f.runs, "runs", 3, "upgrades per number of clusters")
	fs.IntVar(&f.nodes, "nodes", 100, "nodes of the rollout after them, per number of clusters: the first upgrades, the others find it done (0: none)")
	fs.IntVar(&f.charts, "charts", 50, "charts in the one spec (0: skip)")
	fs.DurationVar(&f.chartDelay, "chart-delay", time.Second, "the readiness delay of each chart of the spec")
	fs.StringVar(&f.out, "out", "", "also write the tables to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, c := range strings.Split(clusters, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("--clusters: %q is not a positive number", c)
		}
		f.clusters = append(f.clusters, n)
	}
	r := &report{}
	r.line("### Scale")
	r.line("")
	r.machine()
	r.line("")
	if err := benchClusters(ctx, f, r, log); err != nil {
		return err
	}
	if f.charts > 0 {
		if err := benchCharts(ctx, f, r, log); err != nil {
			return err
		}
	}
	return r.emit(out, f.out)
}

// clusterRow is what one number of clusters' runs measured.
type clusterRow struct {
	clusters          int
	wall, wait, exit  []time.Duration
	cpu               []time.Duration
	rss               []int64
	reqs, lists, gets []int
	watches, writes   []int
	last              requests
	// the rollout: the leader's upgrade (also counted above), then the
	// other nodes' runs, which find the target done and ready
	bdBytes     bdWeight // the last cluster's BundleDeployment, as served
	leader      proc
	leaderReqs  int
	followers   []proc
	followerReq []requests
}

// benchClusters upgrades one ManagedChart whose Bundle has n
// BundleDeployments, for each n, in a fresh control plane each.
func benchClusters(ctx context.Context, f scaleFlags, r *report, log io.Writer) error {
	var rows []clusterRow
	for _, n := range f.clusters {
		row, err := benchClusterCount(ctx, f, n, log)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	upgrades := f.runs
	if f.nodes > 0 {
		upgrades++
	}
	r.line("**One ManagedChart, N downstream clusters.** `make bench-scale` (`scripts/bench-scale`): the Bundle has N "+
		"BundleDeployments; after each Helm upgrade the simulator makes cluster i ready (i+1)/N × %s after it applied. "+
		"%d upgrades per N (alternating 1.0.0 ⇄ 2.0.0; the last is the rollout's first node, below), medians, latency "+
		"percentiles over those %d; a fresh control plane per N.", f.readyOverTime, upgrades, upgrades)
	r.line("")
	var rowsOut [][]string
	for _, c := range rows {
		rowsOut = append(rowsOut, []string{itoa(c.clusters), secs(median(c.wall)), millis(median(c.exit)), millis(percentile(c.exit, 99)),
			millis(median(c.wait)), millis(median(c.cpu)), mb(maxOf(c.rss)), itoa(median(c.reqs)),
			fmt.Sprintf("%d / %d / %d / %d", median(c.gets), median(c.lists), median(c.watches), median(c.writes))})
	}
	r.table([]string{"BundleDeployments", "wall", "ready write → exit p50", "p99", "ready write → wait done", "CPU", "peak RSS (max)",
		"API requests", "get / list / watch / write"}, rowsOut)
	r.line("")
	last := rows[len(rows)-1]
	r.line("Each BundleDeployment is %.1f KB of JSON as the API server serves it (the last cluster's, after the upgrades): "+
		"the Helm values in spec.options and spec.stagedOptions, %d resources, %d conditions, as Fleet writes them.",
		float64(last.bdBytes.json)/1024, last.bdBytes.resources, last.bdBytes.conditions)
	r.line("")
	r.line("Requests of the last upgrade at %d BundleDeployments: %s.", last.clusters, last.last.kinds())
	r.line("")
	if f.nodes == 0 {
		return nil
	}
	r.line("**A rollout over %d nodes, and the no-op run.** Then %d nodes run the Job one after another against the "+
		"same target, as system-upgrade-controller with concurrency 1 would, each with a journal and Lease identity of "+
		"its own: the first upgrades (its upgrade is the last of the rows above), the %d others find the target done "+
		"and ready (each printed \"nothing to do\"). A no-op run is one of those.", f.nodes, f.nodes, f.nodes-1)
	r.line("")
	rowsOut = nil
	for _, c := range rows {
		var walls, cpus []time.Duration
		var rss []int64
		var reqs []int
		var total time.Duration
		sum := requests{}
		for i, p := range c.followers {
			walls, cpus, rss = append(walls, p.Wall), append(cpus, p.CPU), append(rss, p.MaxRSS)
			reqs = append(reqs, c.followerReq[i].Total)
			total += p.Wall
			sum.add(c.followerReq[i])
		}
		rowsOut = append(rowsOut, []string{itoa(c.clusters), fmt.Sprintf("%d (max %d)", median(reqs), maxOf(reqs)),
			millis(median(walls)), millis(percentile(walls, 90)), millis(median(cpus)), mb(median(rss)),
			secs(c.leader.Wall), secs(total), itoa(c.leaderReqs + sum.Total)})
	}
	r.table([]string{"BundleDeployments", "no-op run: API requests", "wall p50", "wall p90", "CPU", "peak RSS",
		"rollout: first node", fmt.Sprintf("the %d others (Σ wall)", f.nodes-1), "API requests, all nodes"}, rowsOut)
	r.line("")
	var follower requests
	for _, q := range last.followerReq {
		follower = q
	}
	r.line("Requests of the last no-op run at %d BundleDeployments: %s.", last.clusters, follower.kinds())
	r.line("")
	return nil
}

func benchClusterCount(ctx context.Context, f scaleFlags, n int, log io.Writer) (clusterRow, error) {
	row := clusterRow{clusters: n}
	logf(log, "%d clusters: starting the control plane and the Fleet simulator", n)
	w, err := startWorldOf(ctx, n, true)
	if err != nil {
		return row, err
	}
	defer w.stop()
	rel := release{name: "demo-app", releaseNS: "demo-system"}
	start := time.Now()
	if err := w.deploy(ctx, rel, 30*time.Minute); err != nil {
		return row, err
	}
	logf(log, "%d clusters: demo-app 1.0.0 deployed in %s", n, secs(time.Since(start)))
	w.sim.SetFault(namespace, rel.name, fleetsim.Fault{ReadyOverTime: f.readyOverTime})
	type run struct {
		p     proc
		ready time.Time
		tl    toolLog
	}
	var runs []run
	upgrades := f.runs
	if f.nodes > 0 {
		upgrades++ // the rollout's first node
	}
	to := ""
	for i := range upgrades {
		node := "bench"
		if i == f.runs {
			node = "node-000"
		}
		down := i%2 == 1
		to = "2.0.0"
		if down {
			to = "1.0.0"
		}
		p, err := runProc(ctx, nil, f.chartUpgrader, w.upgradeArgsOn(node, rel, to, down, 25*time.Minute)...)
		if err != nil {
			return row, err
		}
		if err := p.ok(fmt.Sprintf("chart-upgrader → %s at %d clusters", to, n)); err != nil {
			return row, err
		}
		ready := w.sim.LastStatusWrite(namespace, rel.name)
		if ready.Before(p.Start) || ready.After(p.End) {
			return row, fmt.Errorf("%d clusters, → %s: the ready write was not during the run", n, to)
		}
		runs = append(runs, run{p: p, ready: ready, tl: parseToolLog(p.Output)})
		logf(log, "%d clusters: → %s on %s  wall %s, ready write → exit %s, peak RSS %s, CPU %s", n, to, node, secs(p.Wall),
			millis(p.End.Sub(ready)), mb(p.MaxRSS), millis(p.CPU))
	}
	for i := 1; i < f.nodes; i++ {
		node := fmt.Sprintf("node-%03d", i)
		p, err := runProc(ctx, nil, f.chartUpgrader, w.upgradeArgsOn(node, rel, to, true, 25*time.Minute)...)
		if err != nil {
			return row, err
		}
		if err := p.ok(fmt.Sprintf("chart-upgrader → %s on %s at %d clusters", to, node, n)); err != nil {
			return row, err
		}
		if !strings.Contains(string(p.Output), "nothing to do") {
			return row, fmt.Errorf("%d clusters, %s: the run did not find the target done:\n%s", n, node, tail(p.Output))
		}
		row.followers = append(row.followers, p)
	}
	if f.nodes > 1 {
		logf(log, "%d clusters: %d no-op runs, median wall %s, CPU %s", n, len(row.followers),
			millis(median(walls(row.followers))), millis(median(cpus(row.followers))))
	}
	if row.bdBytes, err = w.bundleDeploymentSize(ctx, rel, n); err != nil {
		return row, err
	}
	events, err := w.auditEvents()
	if err != nil {
		return row, err
	}
	for _, rn := range runs {
		req := attribute(events, agentChartUpgrader, rn.p.Start, rn.p.End)
		row.wall = append(row.wall, rn.p.Wall)
		row.exit = append(row.exit, rn.p.End.Sub(rn.ready))
		row.wait = append(row.wait, max(first(rn.tl.Ready).Sub(rn.ready), 0))
		row.cpu = append(row.cpu, rn.p.CPU)
		row.rss = append(row.rss, rn.p.MaxRSS)
		row.reqs = append(row.reqs, req.Total)
		row.gets = append(row.gets, req.ByVerb["get"])
		row.lists = append(row.lists, req.ByVerb["list"])
		row.watches = append(row.watches, req.ByVerb["watch"])
		row.writes = append(row.writes, req.Total-req.ByVerb["get"]-req.ByVerb["list"]-req.ByVerb["watch"])
		row.last = req
		row.leader, row.leaderReqs = rn.p, req.Total
	}
	for _, p := range row.followers {
		row.followerReq = append(row.followerReq, attribute(events, agentChartUpgrader, p.Start, p.End))
	}
	return row, nil
}

func walls(ps []proc) []time.Duration {
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		out[i] = p.Wall
	}
	return out
}

func cpus(ps []proc) []time.Duration {
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		out[i] = p.CPU
	}
	return out
}

// benchCharts upgrades f.charts ManagedCharts of demo-app (one namespace,
// distinct releases) with one spec, in one run.
func benchCharts(ctx context.Context, f scaleFlags, r *report, log io.Writer) error {
	logf(log, "%d charts: starting the control plane and the Fleet simulator", f.charts)
	w, err := startWorld(ctx, 1)
	if err != nil {
		return err
	}
	defer w.stop()
	policy, err := os.ReadFile(w.examples + "/policy.yaml")
	if err != nil {
		return err
	}
	rels := make([]release, f.charts)
	var spec strings.Builder
	spec.WriteString("apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n")
	for i := range rels {
		rels[i] = release{name: fmt.Sprintf("demo-%02d", i), releaseNS: fmt.Sprintf("demo-%02d", i)}
		if err := w.create(ctx, rels[i], "1.0.0"); err != nil {
			return err
		}
		// the example policy, pointed at this release's StorageClass and namespace
		p := strings.ReplaceAll(string(policy), "namespace: demo-system", "namespace: "+rels[i].releaseNS)
		p = strings.ReplaceAll(p, "name: demo-app-longhorn", "name: "+rels[i].name+"-longhorn")
		fmt.Fprintf(&spec, "- target: {kind: ManagedChart, namespace: %s, name: %s}\n  chart: {name: demo-app, source: %s}\n  wait: {timeout: 5m}\n",
			namespace, rels[i].name, w.charts())
		for _, line := range strings.Split(strings.TrimRight(p, "\n"), "\n") {
			spec.WriteString("  " + line + "\n")
		}
	}
	specFile, err := w.file("spec-50.yaml", spec.String())
	if err != nil {
		return err
	}
	start := time.Now()
	for _, rel := range rels {
		if err := w.waitReady(ctx, rel, "1.0.0", 10*time.Minute); err != nil {
			return err
		}
		if err := w.demote(ctx, rel); err != nil {
			return err
		}
		w.sim.SetFault(namespace, rel.name, fleetsim.Fault{Delay: f.chartDelay})
	}
	logf(log, "%d charts: deployed in %s; upgrading them with one spec", f.charts, secs(time.Since(start)))
	p, err := runProc(ctx, nil, f.chartUpgrader, append([]string{"upgrade", "--skip-image-check", "--spec", specFile, "--version", "2.0.0"}, w.toolArgs()...)...)
	if err != nil {
		return err
	}
	if err := p.ok(fmt.Sprintf("chart-upgrader --spec (%d charts)", f.charts)); err != nil {
		return err
	}
	events, err := w.auditEvents()
	if err != nil {
		return err
	}
	req := attribute(events, agentChartUpgrader, p.Start, p.End)
	var settle time.Duration
	for _, rel := range rels {
		ready, applied := w.sim.LastStatusWrite(namespace, rel.name), req.AppliedTo[rel.name]
		if applied.IsZero() || !ready.After(applied) || ready.After(p.End) {
			return fmt.Errorf("%s: no write, or not ready after it within the run", rel.name)
		}
		settle += ready.Sub(applied)
	}
	last := rels[len(rels)-1].name
	overhead := p.Wall - settle
	logf(log, "%d charts: wall %s, Fleet %s, peak RSS %s, %d requests", f.charts, secs(p.Wall), secs(settle), mb(p.MaxRSS), req.Total)
	r.line("**One spec, %d charts.** %d ManagedCharts of demo-app in one namespace (distinct releases, each in its own "+
		"namespace, each with the example policy), one cluster each, a %s readiness delay each; one `chart-upgrader "+
		"upgrade --spec` upgrades them one after another to 2.0.0.", f.charts, f.charts, f.chartDelay)
	r.line("")
	n := time.Duration(f.charts)
	r.table([]string{"charts", "wall", "of which Fleet (Σ write → ready)", "overhead per chart", "last ready write → exit", "CPU",
		"peak RSS", "API requests (per chart)"}, [][]string{{
		itoa(f.charts), secs(p.Wall), secs(settle), millis(overhead / n),
		millis(p.End.Sub(w.sim.LastStatusWrite(namespace, last))), millis(p.CPU), mb(p.MaxRSS),
		fmt.Sprintf("%d (%.1f)", req.Total, float64(req.Total)/float64(f.charts))}})
	r.line("")
	r.line("Requests: %s.", req.verbs())
	r.line("")
	// where each chart's time goes, from the tool's log
	tl := parseToolLog(p.Output)
	var inPhases time.Duration
	var cells []string
	for _, ph := range []string{"resolve", "preflight", "merge", "apply", "wait", "verify"} {
		var sum time.Duration
		for _, d := range tl.Phases[ph] {
			sum += d
		}
		inPhases += sum
		cells = append(cells, fmt.Sprintf("%s %s", ph, millis(sum/n)))
	}
	r.line("Mean time per chart by phase (from its log; wait includes Fleet's %s): %s; outside the phases (start-up, "+
		"journal writes, Events): %s.", millis(settle/n), strings.Join(cells, ", "), millis((p.Wall-inPhases)/n))
	r.line("")
	return nil
}

// bdWeight is what a BundleDeployment carries: its JSON's size, its
// status.resources and conditions.
type bdWeight struct{ json, resources, conditions int }

// bundleDeploymentSize is the weight of the BundleDeployment of rel's last
// cluster of n, as the API server serves it.
func (w *world) bundleDeploymentSize(ctx context.Context, rel release, n int) (bdWeight, error) {
	cns := fleetsim.ClusterNamespace(namespace)
	name := fleetsim.BundleDeploymentName(fleetsim.BundleName(rel.name), fleetsim.ClusterName(n-1))
	raw, err := w.env.Kube().CoreV1().RESTClient().Get().
		AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces", cns, "bundledeployments", name).
		SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return bdWeight{}, fmt.Errorf("reading BundleDeployment %s/%s: %w", cns, name, err)
	}
	var bd struct {
		Status struct {
			Resources  []json.RawMessage `json:"resources"`
			Conditions []json.RawMessage `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &bd); err != nil {
		return bdWeight{}, fmt.Errorf("decoding BundleDeployment %s/%s: %w", cns, name, err)
	}
	return bdWeight{json: len(raw), resources: len(bd.Status.Resources), conditions: len(bd.Status.Conditions)}, nil
}
