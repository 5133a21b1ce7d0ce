package suc

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	upgradev1 "github.com/rancher/system-upgrade-controller/pkg/apis/upgrade.cattle.io/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Defaults of NodePlanOptions (`chart-upgrader plan --kind node`).
const (
	DefaultNodePlanName      = "node-upgrade"
	DefaultNodePlanSelector  = "chart-upgrader.io/node-upgrade=true"
	DefaultNodePlanAccount   = "chart-upgrader-node"
	NodePlanDeadlineMargin   = 15 * time.Minute
	nodePreflightDescription = "predicts the drain (chart-upgrader node preflight) before system-upgrade-controller cordons the node\n# and checks every release against the Kubernetes version the nodes move to (--kube-version)"
)

// NodePlanOptions describe a Plan that upgrades k3s or RKE2 itself (the
// upgrade container is rancher/k3s-upgrade or rancher/rke2-upgrade,
// tagged by the controller with the version), whose prepare step is
// `chart-upgrader node preflight`: the Plan's drain predicted before the
// controller's drain cordons the node. A prepare that fails fails the
// Job before any cordon (SUC runs prepare, then drain, then upgrade).
type NodePlanOptions struct {
	Name, Namespace string
	// Image is the upgrade image repository without a tag (--image).
	Image            string
	Version, Channel string
	// PreflightImage is chart-upgrader's image, with its tag
	// (--preflight-image): the controller does not tag a prepare image.
	PreflightImage string
	NodeSelector   string
	ServiceAccount string
	Concurrency    int64
	// Drain is the Plan's drain (DefaultDrain when nil).
	Drain *DrainOptions
	// PreflightRules are what the prediction reads (drainpredict.RBAC).
	PreflightRules []rbacv1.PolicyRule
}

func (o NodePlanOptions) withDefaults() NodePlanOptions {
	if o.Name == "" {
		o.Name = DefaultNodePlanName
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.NodeSelector == "" {
		o.NodeSelector = DefaultNodePlanSelector
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = DefaultNodePlanAccount
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Drain == nil {
		o.Drain = DefaultDrain()
	}
	return o
}

func (o NodePlanOptions) validate() optionErrors {
	p := PlanOptions{Name: o.Name, Namespace: o.Namespace, SpecSecret: "unused", ServiceAccount: o.ServiceAccount, Image: o.Image,
		Version: o.Version, Channel: o.Channel, NodeSelector: o.NodeSelector, Concurrency: o.Concurrency, RunAs: DefaultRunAs, Drain: o.Drain}
	errs := p.validate()
	switch {
	case o.PreflightImage == "":
		errs = append(errs, &OptionError{Option: "preflight-image", Reason: "required: chart-upgrader's image with its tag, e.g. ghcr.io/chart-upgrader/chart-upgrader:v1.4.0 (the controller tags only the upgrade image)"})
	case imageProblem(o.PreflightImage) == "":
		errs = append(errs, &OptionError{Option: "preflight-image", Value: o.PreflightImage, Reason: "has no tag: give chart-upgrader's image with its tag (or digest); the controller does not tag a prepare image"})
	}
	if msgs := validation.IsDNS1123Subdomain(o.Name + "-drain-preflight"); len(msgs) > 0 {
		errs = append(errs, &OptionError{Option: "name", Value: o.Name, Reason: strings.Join(msgs, "; ")})
	}
	return errs
}

// BuildNodePlan validates opts and returns the Plan.
func BuildNodePlan(opts NodePlanOptions) (*upgradev1.Plan, error) {
	o := opts.withDefaults()
	if errs := o.validate(); len(errs) > 0 {
		return nil, outcome.BadInput(errs)
	}
	key, value, _ := cutLabel(o.NodeSelector)
	deadline := int64((o.Drain.Timeout + NodePlanDeadlineMargin + time.Second - 1) / time.Second)
	return &upgradev1.Plan{
		TypeMeta:   metav1.TypeMeta{APIVersion: upgradev1.SchemeGroupVersion.String(), Kind: "Plan"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
		Spec: upgradev1.PlanSpec{
			Concurrency:           o.Concurrency,
			JobActiveDeadlineSecs: deadline,
			NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
			ServiceAccountName:    o.ServiceAccount,
			Channel:               o.Channel,
			Version:               o.Version,
			Tolerations:           ControlPlaneTolerations(),
			Drain:                 o.Drain.spec(),
			Prepare: &upgradev1.ContainerSpec{
				Image: o.PreflightImage,
				// the drain, and every release against the version the
				// nodes move to: Kubernetes expands $(VAR) in args from
				// the container's environment, which SUC sets
				Args:            []string{"node", "preflight", "--kube-version", "$(SYSTEM_UPGRADE_PLAN_LATEST_VERSION)"},
				SecurityContext: UpgradeContext(17017, 17017),
			},
			Upgrade: &upgradev1.ContainerSpec{Image: o.Image},
		},
	}, nil
}

// RenderNodePlan prints the Plan, then its RBAC: the ServiceAccount, a
// ClusterRole of the prediction's reads (and its dry-run evictions) and
// one of what the controller's `kubectl drain` does as that account, each
// bound to it.
func RenderNodePlan(opts NodePlanOptions) ([]byte, error) {
	plan, err := BuildNodePlan(opts)
	if err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	out, err := Marshal(plan)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(out)
	fmt.Fprintf(&b, "---\n# The ServiceAccount of Plan %s runs its three containers: the prepare step that\n"+
		"# %s,\n# the controller's kubectl drain, and the upgrade. The first ClusterRole is the\n"+
		"# prepare step's: reads (Helm's release storage among them: every release's values), and\n"+
		"# create on pods/eviction for its dry-run evictions (RBAC cannot limit a verb to dry runs;\n"+
		"# the drain needs it anyway). The second is kubectl drain's.\n", o.Name, nodePreflightDescription)
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: o.ServiceAccount, Namespace: o.Namespace}}
	docs := []any{sa}
	for _, role := range []struct {
		suffix string
		rules  []rbacv1.PolicyRule
	}{
		{"drain-preflight", o.PreflightRules},
		{"drain", drainRules(o.Drain)},
	} {
		name := o.Name + "-" + role.suffix
		docs = append(docs,
			&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
				ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: role.rules},
			&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: o.ServiceAccount, Namespace: o.Namespace}}})
	}
	for i, d := range docs {
		data, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte("  creationTimestamp: null\n"), nil)
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// drainRules are what `kubectl drain` (k8s.io/kubectl pkg/drain) does:
// cordon (get and patch the node), list the node's pods, get the
// DaemonSets of DaemonSet pods, evict (or, with disableEviction, delete)
// each pod and get it until it is gone.
func drainRules(*DrainOptions) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get"}},
	}
}
