package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/testchart"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The release of the release part: demo-app (with a Deployment) in
// demo-system.
const (
	relNamespace = "demo-system"
	relName      = "demo-app"
	toolHelm     = "helm3"
	agentHelm    = "Helm/3" // the Helm 3 CLI's user agent, Helm/<version>
	toolHelm4    = "helm4"
	agentHelm4   = "Helm/4" // the Helm 4 CLI's user agent, Helm/<version>
)

// relSample is one measured release upgrade.
type relSample struct {
	tool, to string
	proc     proc
	req      requests
	ready    time.Time // the Deployment controller's last status write
}

func (s relSample) settle() time.Duration   { return s.ready.Sub(s.req.Applied) }
func (s relSample) overhead() time.Duration { return s.proc.Wall - s.settle() }

// benchRelease upgrades a plain Helm release runs times per tool,
// alternating 1.0.0 ⇄ 2.0.0 and the tools: chart-upgrader, and `helm
// upgrade --reset-then-reuse-values --wait` of the Helm 3 and Helm 4 CLIs
// (scripts/testenv's helm3 and helm4), on a control plane with workloads
// (the chart's Deployment rolls out for real). The release is installed
// as Helm 4 installs it: server-side.
func benchRelease(ctx context.Context, f upgradeFlags, log io.Writer) ([]relSample, error) {
	logf(log, "starting a control plane with workloads for the release part")
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	examples := filepath.Join(root, "package", "examples")
	dir, err := os.MkdirTemp("", "chart-upgrader-bench-rel-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	charts := filepath.Join(dir, "charts")
	if err := fixture.CopyDir(filepath.Join(examples, "charts"), charts); err != nil {
		return nil, err
	}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		dir := filepath.Join(charts, "demo-app-"+v)
		if err := os.WriteFile(filepath.Join(dir, "templates", "deployment.yaml"), []byte(testchart.DeploymentTemplate), 0o644); err != nil {
			return nil, err
		}
		// each version its own image: every upgrade rolls the Deployment out
		if err := appendFile(filepath.Join(dir, "values.yaml"), "\nwebImage: registry.example/web:"+v+"\n"); err != nil {
			return nil, err
		}
	}
	env, err := testenv.Start(ctx, testenv.Options{AuditLog: true, Workloads: true})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	ac, err := cluster.HelmConfiguration(cluster.NewHelmGetter(env.Config()), relNamespace, cluster.SecretDriver, nil)
	if err != nil {
		return nil, err
	}
	ch, err := loader.Load(filepath.Join(charts, "demo-app-1.0.0"))
	if err != nil {
		return nil, err
	}
	user, err := common.ReadValuesFile(filepath.Join(examples, "values.yaml"))
	if err != nil {
		return nil, err
	}
	in := action.NewInstall(ac)
	in.ReleaseName, in.Namespace, in.CreateNamespace, in.Timeout = relName, relNamespace, true, 2*time.Minute
	in.WaitStrategy = kube.StatusWatcherStrategy
	if _, err := in.RunWithContext(ctx, ch, user); err != nil {
		return nil, fmt.Errorf("installing the release: %w", err)
	}
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	if _, err := env.Kube().StorageV1().StorageClasses().Patch(ctx, relName+"-longhorn", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, err
	}
	patches := map[string]string{}
	for v, p := range map[string]string{"2.0.0": patchTo2, "1.0.0": patchTo1} {
		patches[v] = filepath.Join(dir, "patch-"+v+".yaml")
		if err := os.WriteFile(patches[v], []byte(p), 0o600); err != nil {
			return nil, err
		}
	}
	helm := map[string]string{}
	for _, name := range []string{toolHelm, toolHelm4} {
		if helm[name], err = env.Binary(name); err != nil {
			return nil, err
		}
	}
	helmEnv := testenv.HelmCLIEnv(filepath.Join(dir, "helm"))
	// every tool goes 1.0.0 → 2.0.0 and back, each step a change
	round := []step{{toolCU, "2.0.0"}, {toolHelm, "1.0.0"}, {toolHelm, "2.0.0"}, {toolHelm4, "1.0.0"}, {toolHelm4, "2.0.0"},
		{toolCU, "1.0.0"}}
	var samples []relSample
	for i := 0; len(samples) < 3*f.runs; i++ {
		st := round[i%len(round)]
		var p proc
		switch st.tool {
		case toolCU:
			args := []string{"upgrade", "--skip-image-check", "--target", "release/" + relNamespace + "/" + relName, "--chart-source", charts,
				"--version", st.to, "--policy", filepath.Join(examples, "policy.yaml"), "--timeout", "10m",
				"--kubeconfig", env.KubeconfigPath(), "--state-dir", filepath.Join(dir, "state"), "--lock-file",
				filepath.Join(dir, "upgrade.lock"), "--termination-log", filepath.Join(dir, "termination-log"), "--node-name", "bench"}
			if st.to == "1.0.0" {
				args = append(args, "--allow-downgrade")
			}
			if f.settle != "" {
				args = append(args, "--settle", f.settle)
			}
			p, err = runProc(ctx, nil, f.chartUpgrader, args...)
		default:
			p, err = runProc(ctx, helmEnv, helm[st.tool], "upgrade", relName, filepath.Join(charts, "demo-app-"+st.to),
				"--namespace", relNamespace, "--kubeconfig", env.KubeconfigPath(), "--reset-then-reuse-values",
				"-f", patches[st.to], "--wait", "--timeout", "10m", "--history-max", "10")
		}
		if err != nil {
			return nil, err
		}
		if err := p.ok(st.tool + " → " + st.to); err != nil {
			return nil, err
		}
		samples = append(samples, relSample{tool: st.tool, to: st.to, proc: p})
		logf(log, "%2d/%d release %-14s → %s  %s", len(samples), 3*f.runs, st.tool, st.to, secs(p.Wall))
	}
	events, err := testenv.ReadAuditLog(env.AuditLogPath())
	if err != nil {
		return nil, err
	}
	for i := range samples {
		s := &samples[i]
		agent := map[string]string{toolCU: agentChartUpgrader, toolHelm: agentHelm, toolHelm4: agentHelm4}[s.tool]
		s.req = attribute(events, agent, s.proc.Start, s.proc.End)
		for _, ev := range events {
			ref := ev.ObjectRef
			if ref == nil || ev.Verb != "create" || ref.Resource != "secrets" || !strings.HasPrefix(ref.Name, "sh.helm.release.v1.") ||
				!strings.HasPrefix(ev.UserAgent, agent) {
				continue
			}
			if t := ev.StageTimestamp; !t.Before(s.proc.Start) && !t.After(s.proc.End) && t.After(s.req.Applied) {
				s.req.Applied = t
			}
		}
		for _, ev := range events {
			ref := ev.ObjectRef
			if ref == nil || ref.Resource != "deployments" || ref.Subresource != "status" || ref.Name != relName+"-web" ||
				!strings.HasPrefix(ev.UserAgent, "kube-controller-manager") {
				continue
			}
			if t := ev.StageTimestamp; t.After(s.req.Applied) && t.Before(s.proc.End) && t.After(s.ready) {
				s.ready = t
			}
		}
		if s.req.Applied.IsZero() || s.ready.IsZero() {
			return nil, fmt.Errorf("release %s → %s: no revision written, or no Deployment status write after it, in the audit log", s.tool, s.to)
		}
	}
	return samples, nil
}

// releaseReport adds the release figures, chart-upgrader beside Helm.
func releaseReport(r *report, f upgradeFlags, samples []relSample) {
	type col struct {
		wall, overhead, settle, exit, cpu []time.Duration
		rss                               []int64
		reqs                              []int
		schemaReads                       []int
		schemaSpan                        []time.Duration
	}
	cols := map[string]*col{toolCU: {}, toolHelm: {}, toolHelm4: {}}
	for _, s := range samples {
		c := cols[s.tool]
		c.wall, c.overhead, c.settle = append(c.wall, s.proc.Wall), append(c.overhead, s.overhead()), append(c.settle, s.settle())
		c.exit, c.cpu = append(c.exit, s.proc.End.Sub(s.ready)), append(c.cpu, s.proc.CPU)
		c.rss, c.reqs = append(c.rss, s.proc.MaxRSS), append(c.reqs, s.req.Total)
		c.schemaReads, c.schemaSpan = append(c.schemaReads, s.req.SchemaReads), append(c.schemaSpan, s.req.SchemaSpan)
	}
	cu, hm, h4 := cols[toolCU], cols[toolHelm], cols[toolHelm4]
	r.line("")
	r.line("### A plain Helm release, beside `helm upgrade --reset-then-reuse-values --wait` (Helm 3 and 4)")
	r.line("")
	r.line("The example with a Deployment added, installed as the release demo-system/demo-app, upgraded %d times by each "+
		"tool, alternating 1.0.0 ⇄ 2.0.0 and interleaving the tools, on a control plane with workloads (the Deployment "+
		"rolls out for real: controller-manager, scheduler, KWOK). The release is installed as Helm 4 installs it "+
		"(server-side). Helm 3 is the CLI v3.22.0's `helm upgrade --reset-then-reuse-values --wait`, given the same values "+
		"patch as the script baseline above (client-side, polling every 2 s); Helm 4 is the CLI v4.3.1 with the same flags "+
		"(its `--wait` is the kstatus watcher; `auto` keeps the release server-side). chart-upgrader applies as the release "+
		"recorded too, after its conflict check (every object read, and computed in-process against the cluster's OpenAPI schemas). \"Controllers\" is the tool's write of the new revision → the Deployment controller's last "+
		"status write; \"ready write → exit\" is how long each tool takes to notice it.", f.runs)
	r.line("")
	// a row: chart-upgrader, Helm 3, Helm 4, and each Helm ÷ chart-upgrader
	// where ratio says how much more the Helm takes (nil: no ratio)
	type fig struct {
		show  func(*col) string
		ratio func(*col) float64
	}
	row := func(name string, g fig) []string {
		out := []string{name, g.show(cu), g.show(hm), g.show(h4), "", ""}
		if g.ratio != nil {
			out[4], out[5] = ratio(g.ratio(hm), g.ratio(cu)), ratio(g.ratio(h4), g.ratio(cu))
		}
		return out
	}
	dur := func(pick func(*col) []time.Duration, pct float64, show func(time.Duration) string, withRatio bool) fig {
		at := func(c *col) time.Duration { return percentile(pick(c), pct) }
		g := fig{show: func(c *col) string { return show(at(c)) }}
		if withRatio {
			g.ratio = func(c *col) float64 { return at(c).Seconds() }
		}
		return g
	}
	wall := func(c *col) []time.Duration { return c.wall }
	settle := func(c *col) []time.Duration { return c.settle }
	overhead := func(c *col) []time.Duration { return c.overhead }
	exit := func(c *col) []time.Duration { return c.exit }
	cpu := func(c *col) []time.Duration { return c.cpu }
	r.table([]string{"per upgrade", "chart-upgrader", "helm 3 (CLI)", "helm 4 (CLI)", "helm 3 ÷ chart-upgrader", "helm 4 ÷ chart-upgrader"}, [][]string{
		row("wall time, median", dur(wall, 50, secs, true)),
		row("of which the controllers (write → ready), median", dur(settle, 50, secs, false)),
		row("**overhead** (wall − controllers), median", dur(overhead, 50, secs, true)),
		row("**ready write → exit**, median", dur(exit, 50, millis, true)),
		row("ready write → exit, p90", dur(exit, 90, millis, false)),
		row("CPU time (user+sys), median", dur(cpu, 50, millis, true)),
		row("peak RSS, median", fig{show: func(c *col) string { return mb(median(c.rss)) }}),
		row("**API requests**, median (p90)", fig{show: func(c *col) string {
			return fmt.Sprintf("%d (%d)", median(c.reqs), percentile(c.reqs, 90))
		}, ratio: func(c *col) float64 { return float64(median(c.reqs)) }}),
		row("of which the conflict check's schema reads (/openapi/v3), median: requests, first sent → last answered", fig{show: func(c *col) string {
			if median(c.schemaReads) == 0 {
				return "none"
			}
			return fmt.Sprintf("%d, %.1f ms", median(c.schemaReads), float64(median(c.schemaSpan).Microseconds())/1000)
		}}),
	})
	r.line("")
	r.line("chart-upgrader decides every value (the report), waits by watch, and rolls back on a failed wait; Helm's " +
		"`--reset-then-reuse-values` keeps the stale webhook pin and the old CPU limit (docs/release.md), and its " +
		"`--wait` looks again every 2 s.")
}

// appendFile adds text at the end of the file at path.
func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
