package phase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/journal"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
)

// StatusReport is what `chart-upgrader status` shows. It carries hashes and
// versions, never values.
type StatusReport struct {
	Target          string          `json:"target"`
	Exists          bool            `json:"exists"`
	Version         string          `json:"version,omitempty"`
	Paused          bool            `json:"paused"`
	PausedByUs      bool            `json:"pausedByChartUpgrader"`
	AppliedVersion  string          `json:"appliedVersion,omitempty"`
	AppliedHash     string          `json:"appliedValuesSha256,omitempty"`
	AppliedAt       string          `json:"appliedAt,omitempty"`
	PreviousVersion string          `json:"previousVersion,omitempty"`
	ValuesHash      string          `json:"valuesSha256,omitempty"`
	ValuesChanged   bool            `json:"valuesChangedSinceApply"`
	Ready           bool            `json:"ready"`
	Readiness       []string        `json:"waitingFor,omitempty"`
	NonReady        []string        `json:"nonReady,omitempty"`
	Clusters        string          `json:"readyClusters,omitempty"`
	Backups         []string        `json:"backups,omitempty"`
	Journal         []journal.Entry `json:"journal,omitempty"`
}

// Status reads the target, its readiness and the local journal. It makes
// no writes and takes no lock.
func Status(ctx context.Context, opts Options, format string) error {
	opts.defaults()
	t, err := spec.ParseTarget(opts.Target)
	if err != nil {
		return outcome.BadInput(fmt.Errorf("--target: %w", err))
	}
	stateDir, _ := LocalPaths(opts.HostRoot, opts.StateDir, opts.LockFile)
	cfg, err := RESTConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	env, err := NewEnv(cfg, opts.Log)
	if err != nil {
		return err
	}
	r := StatusReport{Target: t.String()}
	mc, found, err := env.Target.Get(ctx, t.Namespace, t.Name)
	if err != nil {
		return err
	}
	if found {
		r.Exists, r.Version, r.Paused, r.PausedByUs = true, mc.Version, mc.Paused, mc.PausedByUs()
		r.AppliedVersion = mc.Annotations[target.AnnotationVersion]
		r.AppliedHash = mc.Annotations[target.AnnotationValuesHash]
		r.AppliedAt = mc.Annotations[target.AnnotationAppliedAt]
		r.PreviousVersion = mc.Annotations[target.AnnotationPreviousVersion]
		r.ValuesHash = mc.ValuesHash()
		r.ValuesChanged = r.AppliedHash != "" && r.AppliedHash != r.ValuesHash
		want := target.Want{Version: mc.Version}
		if w, ok := mc.AppliedWant(); ok && w.Version == mc.Version && !r.ValuesChanged {
			want = w
		}
		b, bds, err := env.Target.Look(ctx, mc)
		if err != nil {
			return err
		}
		ev := target.Evaluate(want, mc, b, bds)
		r.Ready, r.Readiness, r.NonReady = ev.Ready, ev.Waiting, ev.NonReady
		r.Clusters = fmt.Sprintf("%d/%d", ev.ReadyClusters, ev.DesiredClusters)
		secrets, err := env.Kube.CoreV1().Secrets(t.Namespace).List(ctx, metav1.ListOptions{LabelSelector: target.LabelBackupOf + "=" + t.Name})
		if err != nil {
			return fmt.Errorf("listing backups: %w", err)
		}
		for _, s := range secrets.Items {
			r.Backups = append(r.Backups, s.Name)
		}
	}
	if store, err := journal.Open(stateDir); err == nil {
		if r.Journal, err = store.List(t.String()); err != nil {
			return err
		}
	}
	if format == "json" {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	writeStatus(opts.Out, r)
	if !r.Exists {
		return outcome.Refused(errors.New(t.String() + " not found"))
	}
	return nil
}

func writeStatus(w io.Writer, r StatusReport) {
	if !r.Exists {
		fmt.Fprintf(w, "%s: not found\n", r.Target)
		return
	}
	state := "ready"
	if !r.Ready {
		state = "not ready"
	}
	fmt.Fprintf(w, "%s: version %s, %s (clusters %s)", r.Target, r.Version, state, r.Clusters)
	if r.Paused {
		fmt.Fprintf(w, ", PAUSED")
		if r.PausedByUs {
			fmt.Fprintf(w, " by chart-upgrader")
		}
	}
	fmt.Fprintln(w)
	if r.AppliedVersion != "" {
		fmt.Fprintf(w, "  applied by chart-upgrader: %s (from %s) at %s, values sha256 %s\n",
			r.AppliedVersion, r.PreviousVersion, r.AppliedAt, short(r.AppliedHash))
	}
	if r.ValuesChanged {
		fmt.Fprintf(w, "  values changed since (now sha256 %s)\n", short(r.ValuesHash))
	}
	for _, l := range r.Readiness {
		fmt.Fprintf(w, "  waiting for: %s\n", l)
	}
	for _, l := range r.NonReady {
		fmt.Fprintf(w, "  not ready: %s\n", l)
	}
	if len(r.Backups) > 0 {
		fmt.Fprintf(w, "  backups: %s\n", strings.Join(r.Backups, ", "))
	}
	for _, e := range r.Journal {
		phases := make([]string, 0, len(e.Phases))
		for _, p := range []string{"resolve", "preflight", "merge", "apply", "wait", "verify", "restore"} {
			if _, ok := e.Phases[p]; ok {
				phases = append(phases, p)
			}
		}
		done := "in progress"
		if e.Completed {
			done = "completed"
		}
		fmt.Fprintf(w, "  journal: %s → %s %s (%s) at %s\n", e.FromVersion, e.ToVersion, done,
			strings.Join(phases, ","), e.UpdatedAt.Format("2006-01-02 15:04:05Z"))
	}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
