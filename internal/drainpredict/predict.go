// Package drainpredict predicts whether a node's drain would finish, before
// the cordon, and names what would hold it: the pods kubectl's drain
// filters refuse, the disruption budgets the eviction API would keep
// answering 429 for, the eviction webhooks that refuse, KubeVirt's VMs
// that cannot live-migrate, Longhorn's instance-manager budgets that guard
// a volume's last healthy replica, and a system-upgrade-controller Plan's
// own timing. It writes nothing: it lists each kind once and asks the
// server dry-run evictions, which are questions.
//
// Each rule is one file behind the Rule interface: it reads what it needs
// through the World (every list memoized, so two rules share one LIST)
// and judges in plain Go. A new operator's rule is one file and one line
// in rules.
package drainpredict

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Drain is the drain predicted: kubectl drain's flags.
type Drain struct {
	IgnoreDaemonSets   bool
	DeleteEmptyDirData bool
	Force              bool
	// DisableEviction deletes pods instead of evicting them: budgets and
	// eviction webhooks are bypassed.
	DisableEviction bool
	// PodSelector limits the pods drained (a label selector).
	PodSelector string
	// SkipWaitForDeleteTimeout: pods deleting for longer than this many
	// seconds are not waited for.
	SkipWaitForDeleteTimeout int
	// Timeout bounds the drain; zero: kubectl waits forever.
	Timeout time.Duration
}

// Plan is what a system-upgrade-controller Plan says of the drain its
// Jobs run, beyond the flags.
type Plan struct {
	Namespace, Name string
	// TimeoutNanos: spec.drain.timeout was an integer, which SUC passes
	// to kubectl as that many nanoseconds.
	TimeoutNanos *int64
	// TimeoutWritten is spec.drain.timeout as written ("" when unset).
	TimeoutWritten string
	// Deadline is the Job's activeDeadlineSeconds (0: none).
	Deadline time.Duration
	// DeadlineFromController: the deadline is the controller's default
	// (SYSTEM_UPGRADE_JOB_ACTIVE_DEADLINE_SECONDS, 600 s unless set).
	DeadlineFromController bool
	Concurrency            int64
	// Applying are the nodes the Plan is upgrading now (status.applying).
	Applying []string
}

// Clients are what the prediction reads with. Dynamic may be nil: the
// kinds of CRDs (KubeVirt, Longhorn, Plans) are then not read, and the
// prediction says so.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Options are one prediction's.
type Options struct {
	Node  string
	Drain Drain
	// Plan, when set, is the Plan whose drain this is.
	Plan *Plan
}

// Finding is one blocker or warning.
type Finding struct {
	// Rule is the rule's name: "kubectl", "budget", "webhook",
	// "kubevirt", "longhorn", "plan".
	Rule string `json:"rule"`
	// Pod is namespace/name, and Owner Kind/name of its controller, when
	// the finding is about a pod.
	Pod   string `json:"pod,omitempty"`
	Owner string `json:"owner,omitempty"`
	// Why says what holds the drain (or what it costs).
	Why string `json:"why"`
	// Unblock says what lifts it.
	Unblock string `json:"unblock,omitempty"`
}

// String is the finding in one line.
func (f Finding) String() string {
	s := f.Rule + ": "
	if f.Pod != "" {
		s += "pod " + f.Pod
		if f.Owner != "" {
			s += " (" + f.Owner + ")"
		}
		s += ": "
	}
	s += f.Why
	if f.Unblock != "" {
		s += "; to unblock: " + f.Unblock
	}
	return s
}

// Prediction is the verdict on a node's drain.
type Prediction struct {
	Node string `json:"node"`
	// Evicted counts the pods the drain would evict (or delete).
	Evicted  int       `json:"evicted"`
	Blockers []Finding `json:"blockers"`
	Warnings []Finding `json:"warnings"`
	// NotChecked says what could not be read or asked, and so was not
	// judged.
	NotChecked []string `json:"notChecked,omitempty"`
	// Requests counts the API requests the prediction made.
	Requests int `json:"requests"`
}

// Finishes reports whether the drain would finish.
func (p *Prediction) Finishes() bool { return len(p.Blockers) == 0 }

// Err is nil when the drain would finish, else a refusal
// (outcome.ErrRefused, exit 3) naming every blocker.
func (p *Prediction) Err() error {
	if p.Finishes() {
		return nil
	}
	lines := make([]string, len(p.Blockers))
	for i, b := range p.Blockers {
		lines[i] = b.String()
	}
	return outcome.Refused(fmt.Errorf("the drain of node %q would not finish: %d blocker(s): %s",
		p.Node, len(p.Blockers), strings.Join(lines, " | ")))
}

func (p *Prediction) block(f Finding) { p.Blockers = append(p.Blockers, f) }
func (p *Prediction) warn(f Finding)  { p.Warnings = append(p.Warnings, f) }

// Rule is one component's say on the drain.
type Rule interface {
	// Name is the rule's, as Finding.Rule.
	Name() string
	// Judge adds the rule's blockers and warnings to p. It reads through
	// w and may claim pods whose eviction it alone decides.
	Judge(ctx context.Context, w *World, p *Prediction) error
	// Reads are the RBAC rules of what Judge reads (and asks).
	Reads() []rbacv1.PolicyRule
}

// RBAC are the rules a prediction needs: every rule's reads, the node's
// get, and the get of system-upgrade-controller Plans (--plan). The
// dry-run evictions need create on pods/eviction, which RBAC cannot
// limit to dry runs: the Job's own drain needs it anyway.
func RBAC() []rbacv1.PolicyRule {
	out := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{plansResource.Group}, Resources: []string{plansResource.Resource}, Verbs: []string{"get"}},
	}
	seen := map[string]bool{}
	for _, r := range rules {
		for _, rule := range r.Reads() {
			key := fmt.Sprint(rule.APIGroups, rule.Resources, rule.Verbs)
			if !seen[key] {
				seen[key] = true
				out = append(out, rule)
			}
		}
	}
	return out
}

// rules run in this order: kubectl's filters decide which pods are
// evicted; the operators claim the pods they move themselves before the
// budgets and the webhooks judge the rest; the Plan's timing last.
var rules = []Rule{
	kubectlFilters{},
	kubevirtRule{},
	longhornRule{},
	budgetsRule{},
	webhooksRule{},
	planRule{},
}

// Predict predicts opts.Drain of opts.Node. Bad input (an unknown node, a
// selector that does not parse) is outcome.ErrBadInput; a read that fails
// is an error; a blocker is not an error: see Prediction.Err.
func Predict(ctx context.Context, c Clients, opts Options) (*Prediction, error) {
	if opts.Node == "" {
		return nil, outcome.BadInput(fmt.Errorf("no node given"))
	}
	if _, err := labels.Parse(opts.Drain.PodSelector); err != nil {
		return nil, outcome.BadInput(fmt.Errorf("--pod-selector %q: %w", opts.Drain.PodSelector, err))
	}
	w := newWorld(c, opts)
	if err := w.readNode(ctx); err != nil {
		return nil, err
	}
	p := &Prediction{Node: opts.Node, Blockers: []Finding{}, Warnings: []Finding{}}
	for _, r := range rules {
		if err := r.Judge(ctx, w, p); err != nil {
			return nil, fmt.Errorf("predicting the drain of node %q (%s): %w", opts.Node, r.Name(), err)
		}
	}
	p.Evicted = len(w.Evict)
	p.NotChecked = append(p.NotChecked, w.notChecked...)
	p.Requests = int(w.requests.Load())
	sortFindings(p.Blockers)
	sortFindings(p.Warnings)
	return p, nil
}

func sortFindings(fs []Finding) {
	order := map[string]int{}
	for i, r := range rules {
		order[r.Name()] = i
	}
	sort.SliceStable(fs, func(i, j int) bool {
		if order[fs[i].Rule] != order[fs[j].Rule] {
			return order[fs[i].Rule] < order[fs[j].Rule]
		}
		return fs[i].Pod < fs[j].Pod
	})
}

// podName is namespace/name.
func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// ownerOf is the pod's controller, Kind/name, "" without one.
func ownerOf(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.Kind + "/" + o.Name
		}
	}
	return ""
}

// podKey names a pod across rules.
type podKey = types.UID
