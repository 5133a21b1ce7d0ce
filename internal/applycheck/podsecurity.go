package applycheck

import (
	"context"
	"fmt"
	"sync"

	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the Pod Security check: the pods the upgrade makes
// (pods.go), each workload's template judged against its namespace's
// pod-security.kubernetes.io labels with the Pod Security admission's own
// policy checks (k8s.io/pod-security-admission). The API server accepts
// a Deployment whose pods its namespace's level forbids, and refuses
// every pod its ReplicaSet then makes: the rollout never starts.

// WarnPodSecurity: a namespace's warn or audit level forbids pods the
// upgrade makes (the API server lets them in, and warns or audits).
const WarnPodSecurity values.WarningKind = "pod-security"

func init() {
	manifestChecks = append(manifestChecks, checkPodSecurity)
}

// PodSecurityViolation is a workload whose pods violate a Pod Security
// level of their namespace.
type PodSecurityViolation struct {
	Object    string // Kind namespace/name
	Namespace string
	Mode      string // enforce, warn or audit
	Level     string // "restricted:latest", as the server names it
	// Detail is the policy's own words: each check and the containers
	// at fault ("allowPrivilegeEscalation != false (container "web" must
	// set securityContext.allowPrivilegeEscalation=false), ...").
	Detail string
}

// Verdict is a refusal for the enforce level, a warning for warn and
// audit, whoever applies.
func (v PodSecurityViolation) Verdict(Applier) (string, *values.Warning) {
	if v.Mode != "enforce" {
		return "", &values.Warning{Kind: WarnPodSecurity, Path: v.Object, Message: v.String()}
	}
	return v.String(), nil
}

// String names the object, the level, the checks and containers, and
// what follows.
func (v PodSecurityViolation) String() string {
	s := fmt.Sprintf("pod security: %s: its pods violate PodSecurity %q (namespace %s, label %s%s): %s", v.Object, v.Level, v.Namespace,
		"pod-security.kubernetes.io/", v.Mode, v.Detail)
	if v.Mode == "enforce" {
		return s + "; the API server takes the workload and refuses every pod it makes, so the rollout never starts (exemptions in the API server's admission configuration cannot be read here)"
	}
	return s + "; the API server lets them in and " + map[string]string{"warn": "warns", "audit": "audits"}[v.Mode]
}

var (
	psaOnce      sync.Once
	psaEvaluator policy.Evaluator
	psaErr       error
)

// evaluator is the Pod Security admission's evaluator of its default
// checks, built once.
func evaluator() (policy.Evaluator, error) {
	psaOnce.Do(func() { psaEvaluator, psaErr = policy.NewEvaluator(policy.DefaultChecks(), nil) })
	return psaEvaluator, psaErr
}

// checkPodSecurity judges the template of each rollout at its
// namespace's enforce, warn and audit levels (the namespace read once).
func checkPodSecurity(ctx context.Context, s Scope, res *Result) error {
	rollouts := s.rollouts()
	if len(rollouts) == 0 {
		return nil
	}
	ev, err := evaluator()
	if err != nil {
		return fmt.Errorf("building the Pod Security checks: %w", err)
	}
	for _, r := range rollouts {
		ns := s.namespaceLabels(ctx, res, r.Namespace)
		if ns.err != nil {
			return ns.err
		}
		if ns.unread != "" {
			res.NotChecked = append(res.NotChecked, fmt.Sprintf("%s: Pod Security not checked: %s", r.Object, ns.unread))
			continue
		}
		// an unset or bad label is the API server's default: privileged
		// where its admission configuration sets none (not readable here)
		p, _ := psaapi.PolicyToEvaluate(ns.labels, psaapi.Policy{
			Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
			Audit:   psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
			Warn:    psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}})
		seen := map[string]bool{}
		for _, m := range []struct {
			mode string
			lv   psaapi.LevelVersion
		}{{"enforce", p.Enforce}, {"warn", p.Warn}, {"audit", p.Audit}} {
			if m.lv.Level == psaapi.LevelPrivileged || seen[m.lv.String()] {
				continue
			}
			seen[m.lv.String()] = true
			pod := r.Pod()
			agg := policy.AggregateCheckResults(ev.EvaluatePod(m.lv, &pod.ObjectMeta, &pod.Spec))
			if agg.Allowed {
				continue
			}
			res.Findings = append(res.Findings, PodSecurityViolation{Object: r.Object, Namespace: r.Namespace, Mode: m.mode,
				Level: m.lv.String(), Detail: agg.ForbiddenDetail()})
		}
	}
	return nil
}
