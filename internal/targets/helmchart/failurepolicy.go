package helmchart

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
	common "helm.sh/helm/v4/pkg/release/common"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// The failure policies of helm-controller (spec.failurePolicy), which its
// Job passes to klipper-helm as FAILURE_POLICY: what a run of the Job does
// when it finds the release failed or pending (docs/helmchart.md#failure-policy).
const (
	// PolicyReinstall, helm-controller's default: helm uninstall, then
	// install. Every object of the chart is deleted first.
	PolicyReinstall = "reinstall"
	// PolicyAbort: the run fails and waits for an operator.
	PolicyAbort = "abort"
	// PolicyRetry: the run upgrades from the failed state (and exits 0
	// whatever that upgrade does).
	PolicyRetry = "retry"
	// PolicyKeep is the spec's, not helm-controller's: leave the
	// HelmChart's policy as it is.
	PolicyKeep = "keep"
)

// AnnotationFailurePolicyBefore records the HelmChart's own
// spec.failurePolicy from before chart-upgrader first wrote one ("unset"
// when it had none), so that a person can put it back.
const AnnotationFailurePolicyBefore = "chart-upgrader.io/failure-policy-before"

// Options are the options of a helmchart target (the spec's helmchart:
// block).
type Options struct {
	// FailurePolicy is what the upgrade writes in spec.failurePolicy in
	// the same write as the new version: abort (the default) or retry,
	// neither of which uninstalls the chart when the upgrade fails; keep
	// leaves the HelmChart's own.
	FailurePolicy string
}

// DefaultOptions are the options of a spec entry that gives none.
var DefaultOptions = Options{FailurePolicy: PolicyAbort}

// parseOptions reads helmchart: {failurePolicy}.
func parseOptions(file yamlfile.File, n *yaml.Node, field string) (any, error) {
	out := DefaultOptions
	f, err := file.Fields(n, field, "failurePolicy")
	if err != nil {
		return nil, err
	}
	if pn := f.Get("failurePolicy"); pn != nil {
		p, err := file.String(pn, f.Path("failurePolicy"))
		if err != nil {
			return nil, err
		}
		switch p {
		case PolicyAbort, PolicyRetry, PolicyKeep:
			out.FailurePolicy = p
		case PolicyReinstall:
			return nil, file.Failf(pn, f.Path("failurePolicy"), "reinstall uninstalls the running chart when an upgrade fails, and chart-upgrader never writes it: "+
				"want abort or retry, or keep to leave the HelmChart's own policy as it is")
		default:
			return nil, file.Failf(pn, f.Path("failurePolicy"), "unknown failure policy %q (want abort, retry or keep)", p)
		}
	}
	return out, nil
}

// Effective is the failure policy helm-controller gives the HelmChart's
// Job: the HelmChartConfig's when it sets one, else the HelmChart's, else
// reinstall (helm-controller's default); from says which.
func Effective(h *HelmChart, cfg *HelmChartConfig) (policy, from string) {
	switch {
	case cfg != nil && cfg.FailurePolicy != "":
		return cfg.FailurePolicy, fmt.Sprintf("HelmChartConfig %s/%s", cfg.Namespace, cfg.Name)
	case h.FailurePolicy != "":
		return h.FailurePolicy, fmt.Sprintf("helmchart %s/%s", h.Namespace, h.Name)
	}
	return PolicyReinstall, "helm-controller's default: the HelmChart sets none"
}

// toWrite is the spec.failurePolicy an apply writes: for an upgrade the
// spec's choice, for a restore retry (the only policy under which the
// Job moves a failed release back without uninstalling it); "" with keep
// (the HelmChart's own is left as it is).
func toWrite(o Options, restore bool) string {
	switch {
	case o.FailurePolicy == PolicyKeep:
		return ""
	case restore:
		return PolicyRetry
	}
	return o.FailurePolicy
}

// FailurePolicyCheck is what preflight says of the failure policy.
type FailurePolicyCheck struct {
	Problem string // refuse: a HelmChartConfig forces reinstall
	Warning *values.Warning
	Note    string // the policy in force, and what the upgrade writes
}

// CheckFailurePolicy judges the failure policy the upgrade would run
// under: a HelmChartConfig that forces reinstall (which chart-upgrader
// never writes, and which overrides what it writes on the HelmChart) is
// refused unless the spec says keep; keep with reinstall in force is a
// warning.
func CheckFailurePolicy(h *HelmChart, cfg *HelmChartConfig, o Options) FailurePolicyCheck {
	eff, from := Effective(h, cfg)
	var c FailurePolicyCheck
	write := toWrite(o, false)
	if write == "" {
		c.Note = fmt.Sprintf("failure policy %s (%s), kept as it is (helmchart.failurePolicy: keep)", eff, from)
		if eff == PolicyReinstall {
			c.Warning = &values.Warning{Kind: values.WarnTarget, Path: "spec.failurePolicy",
				Message: fmt.Sprintf("the failure policy in force is reinstall (%s) and the spec says keep: if this upgrade fails, "+
					"the next run of helm-controller's Job uninstalls the release (every object of the chart is deleted) and installs it again", from)}
		}
		return c
	}
	c.Note = fmt.Sprintf("failure policy %s (%s); the upgrade writes %s on the HelmChart with the new version", eff, from, write)
	if cfg != nil && cfg.FailurePolicy != "" {
		c.Note += fmt.Sprintf(", and HelmChartConfig %s/%s's %s overrides it", cfg.Namespace, cfg.Name, cfg.FailurePolicy)
		if cfg.FailurePolicy == PolicyReinstall {
			c.Problem = fmt.Sprintf("HelmChartConfig %s/%s sets spec.failurePolicy: reinstall (the CRD's default for a HelmChartConfig that names none), "+
				"which overrides the HelmChart's: if the upgrade fails, the next run of the Job uninstalls the release (every object of the chart is deleted); "+
				"set spec.failurePolicy: abort (or retry) in the HelmChartConfig (chart-upgrader never writes one), "+
				"or set helmchart.failurePolicy: keep in the spec to accept it",
				cfg.Namespace, cfg.Name)
		}
	}
	return c
}

// NextPolicy is the failure policy the Job this upgrade starts runs under:
// the HelmChartConfig's when it sets one, else what the upgrade writes on
// the HelmChart (toWrite), else the one in force.
func NextPolicy(h *HelmChart, cfg *HelmChartConfig, o Options) string {
	if cfg != nil && cfg.FailurePolicy != "" {
		return cfg.FailurePolicy
	}
	if w := toWrite(o, false); w != "" {
		return w
	}
	p, _ := Effective(h, cfg)
	return p
}

// StuckRelease says what klipper-helm's next run (the Job this upgrade
// starts) does with a release whose newest revision is not deployed, as
// its entry script does: pending-install, pending-upgrade,
// pending-rollback, superseded and uninstalling are first set to failed
// (helm set-status); pending-upgrade and superseded are then upgraded at
// once, whatever the policy; the others, and a failed one, go by the
// failure policy (reinstall: helm uninstall, then install; abort: exit 1
// without upgrading; retry: upgrade). A release its Job still runs is live:
// nothing to judge (the apply follows helm-controller). It returns a
// warning when the upgrade may go ahead, a problem when that run would
// uninstall the chart or could not upgrade it.
func StuckRelease(rel *Release, jobRunning bool, policy string) (warning *values.Warning, problem string) {
	if rel == nil || rel.Status == common.StatusDeployed || jobRunning {
		return nil, ""
	}
	what := fmt.Sprintf("helm release %s/%s revision %d (chart %s) is %s and no Job of helm-controller runs it", rel.Namespace, rel.Name, rel.Revision, rel.ChartVersion, rel.Status)
	switch rel.Status {
	case common.StatusPendingUpgrade, common.StatusSuperseded:
		return &values.Warning{Kind: values.WarnTarget, Message: what + ": the Job this upgrade starts (klipper-helm) marks it failed and upgrades at once, whatever the failure policy; nothing is uninstalled"}, ""
	case common.StatusPendingInstall, common.StatusPendingRollback, common.StatusUninstalling, common.StatusFailed:
	default:
		return nil, what + ": klipper-helm would not upgrade it; resolve it first (helm rollback to the last deployed revision)"
	}
	first := "klipper-helm's next run (the Job this upgrade starts) "
	if rel.Status != common.StatusFailed {
		first += "marks it failed, then "
	}
	switch policy {
	case PolicyRetry:
		return &values.Warning{Kind: values.WarnTarget, Message: what + ": " + first + "upgrades it (failure policy retry); nothing is uninstalled"}, ""
	case PolicyReinstall:
		return nil, what + ": " + first + "goes by failure policy reinstall: helm uninstall, then install (every object of the chart deleted). " +
			"Refused: resolve it first (helm rollback to the last deployed revision), or run under failure policy retry"
	default:
		return nil, what + ": " + first + "goes by failure policy " + policy + ": it exits 1 without upgrading. " +
			"Resolve it first (helm rollback to the last deployed revision), or set helmchart.failurePolicy: retry in the spec"
	}
}
