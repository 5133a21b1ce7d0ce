package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
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
	Clusters        string          `json:"readyClusters,omitempty"` // ready/desired units
	Unit            string          `json:"unit,omitempty"`          // what they count: clusters, resources
	Backups         []string        `json:"backups,omitempty"`
	Journal         []upgrade.Entry `json:"journal,omitempty"`
}

// StatusOptions are the inputs of `status`.
type StatusOptions struct {
	Local
	Target string // KIND/NAMESPACE/NAME
	Format string // text, json or yaml
}

// Status reads the target, its readiness and the local journal. It makes
// no writes and takes no lock.
func Status(ctx context.Context, o StatusOptions) error {
	o.Log, o.Out = logAndOut(o.Log, o.Out)
	t, err := spec.ParseTarget(o.Target, targets.Kinds())
	if err != nil {
		return outcome.BadInput(fmt.Errorf("--target: %w", err))
	}
	stateDir, _ := host.LocalPaths(o.HostRoot, o.StateDir, o.LockFile)
	clients, err := connect(ctx, o.Kubeconfig, o.Log)
	if err != nil {
		return err
	}
	target, _, err := openTarget(ctx, clients, t, nil, kind.DefaultApply)
	if err != nil {
		return err
	}
	target = wrapTarget(ctx, target)
	r := StatusReport{Target: t.String()}
	obs, err := target.Read(ctx)
	if err != nil {
		return err
	}
	if obs != nil {
		r.Exists, r.Version, r.Paused, r.PausedByUs = true, obs.Version, obs.Paused, obs.PausedByUs
		r.AppliedVersion, r.AppliedHash = obs.Applied.Version, obs.Applied.ValuesHash
		r.AppliedAt, r.PreviousVersion = obs.Applied.AppliedAt, obs.Applied.PreviousVersion
		r.ValuesHash = obs.ValuesHash
		r.ValuesChanged = r.AppliedHash != "" && r.AppliedHash != r.ValuesHash
		want := upgrade.Want{Version: obs.Version}
		if w, ok := obs.Applied.Want(); ok && w.Version == obs.Version && !r.ValuesChanged {
			want = w
		}
		ev, err := target.Look(ctx, obs, want)
		if err != nil {
			return err
		}
		r.Ready, r.Readiness, r.NonReady = ev.Ready, ev.Waiting, ev.NonReady
		r.Clusters, r.Unit = fmt.Sprintf("%d/%d", ev.ReadyCount, ev.DesiredCount), ev.Unit
		if r.Unit == "" {
			r.Unit = "clusters"
		}
		if r.Backups, err = target.Backups(ctx); err != nil {
			return err
		}
	}
	if store, err := host.Open(stateDir); err == nil {
		if r.Journal, err = store.List(t.String()); err != nil {
			return err
		}
	}
	if o.Format == "json" || o.Format == "yaml" {
		return WriteObject(o.Out, o.Format, r)
	}
	writeStatus(o.Out, r)
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
	fmt.Fprintf(w, "%s: version %s, %s (%s %s)", r.Target, r.Version, state, r.Unit, r.Clusters)
	if r.Paused {
		fmt.Fprintf(w, ", PAUSED")
		if r.PausedByUs {
			fmt.Fprintf(w, " by chart-upgrader")
		}
	}
	fmt.Fprintln(w)
	if r.AppliedVersion != "" {
		fmt.Fprintf(w, "  applied by chart-upgrader: %s (from %s) at %s, values sha256 %s\n",
			r.AppliedVersion, r.PreviousVersion, r.AppliedAt, host.Short(r.AppliedHash))
	}
	if r.ValuesChanged {
		fmt.Fprintf(w, "  values changed since (now sha256 %s)\n", host.Short(r.ValuesHash))
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
		for _, g := range e.Gates {
			fmt.Fprintf(w, "    %s\n", g.Line())
		}
	}
}
