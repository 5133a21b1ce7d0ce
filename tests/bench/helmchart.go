package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/klipperhelm"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The HelmChart of the k3s part: demo-app in kube-system, released into
// demo-system, carrying its chart in spec.chartContent.
const (
	hcNamespace = "kube-system"
	hcName      = "demo-app"
	hcRelease   = "demo-system"
)

// hcSample is one measured HelmChart upgrade.
type hcSample struct {
	to    string
	proc  proc
	req   requests
	ready time.Time // the Job controller's write of the Job's Complete status
}

func (s hcSample) settle() time.Duration   { return s.ready.Sub(s.req.Applied) }
func (s hcSample) overhead() time.Duration { return s.proc.Wall - s.settle() }

// benchHelmChart upgrades a k3s HelmChart runs times, alternating 1.0.0 ⇄
// 2.0.0, through the real helm-controller (tests/klipperhelm runs its Jobs),
// on a control plane of its own with workloads.
func benchHelmChart(ctx context.Context, f upgradeFlags, log io.Writer) ([]hcSample, error) {
	logf(log, "starting a control plane with workloads and the real helm-controller")
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	examples := filepath.Join(root, "package", "examples")
	dir, err := os.MkdirTemp("", "chart-upgrader-bench-hc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	env, err := testenv.Start(ctx, testenv.Options{AuditLog: true, HelmController: true})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	runner, err := klipperhelm.Start(ctx, env.Config(), klipperhelm.Options{})
	if err != nil {
		return nil, err
	}
	defer runner.Stop()
	if err := fixture.InstallHelmChart(ctx, env, hcNamespace, hcName, hcRelease, 2*time.Minute); err != nil {
		return nil, err
	}
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	if _, err := env.Kube().StorageV1().StorageClasses().Patch(ctx, hcName+"-longhorn", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, err
	}
	policy := filepath.Join(dir, "policy.yaml")
	pdata, err := os.ReadFile(filepath.Join(examples, "policy.yaml"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(policy, pdata, 0o600); err != nil {
		return nil, err
	}

	var samples []hcSample
	from := "1.0.0"
	for i := 0; i < f.runs; i++ {
		to := "2.0.0"
		if from == "2.0.0" {
			to = "1.0.0"
		}
		args := []string{"upgrade", "--skip-image-check", "--target", "helmchart/" + hcNamespace + "/" + hcName, "--chart-source", filepath.Join(examples, "charts"),
			"--version", to, "--policy", policy, "--timeout", "10m", "--kubeconfig", env.KubeconfigPath(),
			"--state-dir", filepath.Join(dir, "state"), "--lock-file", filepath.Join(dir, "upgrade.lock"),
			"--termination-log", filepath.Join(dir, "termination-log"), "--node-name", "bench"}
		if to < from {
			args = append(args, "--allow-downgrade")
		}
		if f.settle != "" {
			args = append(args, "--settle", f.settle)
		}
		p, err := runProc(ctx, nil, f.chartUpgrader, args...)
		if err != nil {
			return nil, err
		}
		if err := p.ok("helmchart " + from + " → " + to); err != nil {
			return nil, err
		}
		samples = append(samples, hcSample{to: to, proc: p})
		logf(log, "%2d/%d helmchart      → %s  %s", i+1, f.runs, to, secs(p.Wall))
		from = to
	}
	events, err := testenv.ReadAuditLog(env.AuditLogPath())
	if err != nil {
		return nil, err
	}
	for i := range samples {
		s := &samples[i]
		s.req = attribute(events, agentChartUpgrader, s.proc.Start, s.proc.End)
		for _, ev := range events {
			ref := ev.ObjectRef
			if ref == nil || ref.Resource != "jobs" || ref.Subresource != "status" || ref.Name != helmchart.JobName(hcName) ||
				!strings.HasPrefix(ev.UserAgent, "kube-controller-manager") || (ev.Verb != "update" && ev.Verb != "patch") {
				continue
			}
			if t := ev.StageTimestamp; t.After(s.req.Applied) && t.Before(s.proc.End) && t.After(s.ready) {
				s.ready = t
			}
		}
		if s.req.Applied.IsZero() || s.ready.IsZero() {
			var seen []string
			for _, ev := range events {
				if ref := ev.ObjectRef; ref != nil && ref.Resource == "jobs" && ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" {
					seen = append(seen, fmt.Sprintf("%s %s/%s %s %q %s", ev.Verb, ref.Resource, ref.Subresource, ref.Name, ev.UserAgent, ev.StageTimestamp.Format(time.RFC3339Nano)))
				}
			}
			return nil, fmt.Errorf("helmchart → %s (applied %s, run %s–%s): no write of the helmchart, or no Job status write after it, in the audit log; job writes: %s",
				s.to, s.req.Applied.Format(time.RFC3339Nano), s.proc.Start.Format(time.RFC3339Nano), s.proc.End.Format(time.RFC3339Nano), strings.Join(seen, "\n"))
		}
	}
	return samples, nil
}

// helmChartReport adds the HelmChart figures beside chart-upgrader's on
// the ManagedChart.
func helmChartReport(r *report, f upgradeFlags, mc []sample, hc []hcSample) {
	cu := statsOf(mc, toolCU)
	var wall, overhead, settle, exit, cpu []time.Duration
	var rss []int64
	var reqs []int
	total := requests{ByVerb: map[string]int{}, ByKind: map[string]int{}}
	for _, s := range hc {
		wall, overhead, settle = append(wall, s.proc.Wall), append(overhead, s.overhead()), append(settle, s.settle())
		exit, cpu = append(exit, s.proc.End.Sub(s.ready)), append(cpu, s.proc.CPU)
		rss, reqs = append(rss, s.proc.MaxRSS), append(reqs, s.req.Total)
		total.add(s.req)
	}
	r.line("")
	r.line("### A k3s HelmChart, through the real helm-controller")
	r.line("")
	r.line("The same example as a HelmChart (kube-system/demo-app, its chart in `spec.chartContent`), upgraded %d times "+
		"by chart-upgrader, alternating 1.0.0 ⇄ 2.0.0, on a control plane with workloads: the real helm-controller makes "+
		"a Job per change, `tests/klipperhelm` runs it (Helm 4 SDK), the real Job controller completes it. \"Controllers\" is "+
		"chart-upgrader's write of the HelmChart → the Job controller's write of the Job's Complete status (helm-controller, "+
		"the Job, Helm); the ManagedChart column repeats chart-upgrader's figures above (Fleet simulator, %s delay).", f.runs, f.delay)
	r.line("")
	row := func(name, a, b string) []string { return []string{name, a, b} }
	r.table([]string{"chart-upgrader, per upgrade", "HelmChart", "ManagedChart"}, [][]string{
		row("wall time, median", secs(median(wall)), secs(median(cu.wall))),
		row("of which the controllers (write → ready), median", secs(median(settle)), secs(median(cu.settle))),
		row("**overhead** (wall − controllers), median", secs(median(overhead)), secs(median(cu.overhead))),
		row("overhead, p90", secs(percentile(overhead, 90)), secs(percentile(cu.overhead, 90))),
		row("ready write → exit, median", millis(median(exit)), millis(median(cu.exit))),
		row("CPU time (user+sys), median", millis(median(cpu)), millis(median(cu.cpu))),
		row("peak RSS, median", mb(median(rss)), mb(median(cu.rss))),
		row("**API requests**, median (p90)", fmt.Sprintf("%d (%d)", median(reqs), percentile(reqs, 90)),
			fmt.Sprintf("%d (%d)", median(cu.reqs), percentile(cu.reqs, 90))),
	})
	avg := requests{ByVerb: map[string]int{}, ByKind: map[string]int{}}
	for k, v := range total.ByKind {
		avg.ByKind[k] = (v + len(hc)/2) / len(hc)
	}
	r.line("")
	r.line("HelmChart API requests per upgrade (mean, by verb and resource): %s", avg.kinds())
}
