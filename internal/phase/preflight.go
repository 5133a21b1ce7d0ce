package phase

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
)

// preflightPhase checks that the upgrade may start, and makes no writes.
// Each failed check is one line a person can act on; any → ErrRefused.
// A target this tool already applied (situation applied or done) skips
// the health checks: it is mid-rollout, not broken.
type preflightPhase struct{}

func (preflightPhase) Name() string { return "preflight" }

func (preflightPhase) Run(ctx context.Context, s *State) error {
	if s.Situation == SituationDone || s.Situation == SituationApplied {
		return nil
	}
	var problems []string
	refuse := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	mc := s.MC

	if s.Situation == SituationDowngrade && !s.Opts.AllowDowngrade {
		refuse("%s → %s is a downgrade: give --allow-downgrade if you mean it", s.From, s.To)
	}
	if mc.Paused && !mc.PausedByUs() && !s.Opts.Unpause {
		refuse("the managedchart is paused by someone else (spec.paused=true without the %s annotation): unpause it, or give --unpause", target.AnnotationPaused)
	}
	b, _, err := s.Env.Target.Look(ctx, mc)
	if err != nil {
		return err
	}
	if health := target.Health(mc, b); len(health) > 0 {
		refuse("the managedchart is not healthy; fix it before upgrading:\n  %s", strings.Join(health, "\n  "))
	}
	ns := mc.DefaultNamespace
	if ns == "" {
		ns = "default"
	}
	if pending, err := s.Env.Target.PendingRelease(ctx, ns, mc.Release()); err != nil {
		return err
	} else if pending != "" {
		refuse("helm release %s/%s is %s: another install or upgrade is in progress or was interrupted; resolve it (helm rollback) first", ns, mc.Release(), pending)
	}
	if s.Opts.RequireNodesReady {
		notReady, err := notReadyNodes(ctx, s)
		if err != nil {
			return err
		}
		if len(notReady) > 0 {
			refuse("nodes not Ready: %s", strings.Join(notReady, ", "))
		}
	}
	// the merge must not be refused and the chart must render with it
	if err := computeMerge(ctx, s); err != nil {
		if !errors.Is(err, outcome.ErrRefused) {
			return err
		}
		refuse("%v", err)
	}
	if len(problems) > 0 {
		// another process may have applied the target since resolve read
		// it: what looks unhealthy (not Ready, Helm release pending) is then
		// its rollout, which this process waits for, not a reason to refuse
		if applied, err := appliedMeanwhile(ctx, s); err != nil {
			return err
		} else if applied {
			return nil
		}
		return outcome.Refused(fmt.Errorf("preflight refused %s %s → %s:\n- %s", s.Ref(), s.From, s.To, strings.Join(problems, "\n- ")))
	}
	return nil
}

func notReadyNodes(ctx context.Context, s *State) ([]string, error) {
	nodes, err := s.Env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []string
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			out = append(out, n.Name)
		}
	}
	return out, nil
}

// appliedMeanwhile re-reads the target and reports whether it now carries
// an apply of this version by chart-upgrader (annotations matching its
// values); s.MC, s.Situation and s.Want then say so.
func appliedMeanwhile(ctx context.Context, s *State) (bool, error) {
	mc, found, err := s.Env.Target.Get(ctx, s.MC.Namespace, s.MC.Name)
	if err != nil || !found {
		return false, err
	}
	if Assess(mc, s.To, false) != SituationApplied {
		return false, nil
	}
	w, _ := mc.AppliedWant()
	s.MC, s.Situation, s.Want = mc, SituationApplied, w
	s.Opts.Log.Info("another process applied the target since it was read", "version", w.Version)
	return true, nil
}
