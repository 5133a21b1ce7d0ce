package suc

import (
	"path"
	"time"

	upgradev1 "github.com/rancher/system-upgrade-controller/pkg/apis/upgrade.cattle.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Defaults of PlanOptions, and of the flags of `chart-upgrader plan`.
const (
	// DefaultNamespace is system-upgrade-controller's usual namespace. The
	// controller only acts on Plans in its own namespace, and the Job finds
	// the ServiceAccount and the spec Secret there.
	DefaultNamespace = "system-upgrade"
	// DefaultNodeSelector is the node label that opts a node in.
	DefaultNodeSelector = "chart-upgrader.io/upgrade=true"
	// DefaultServiceAccount is the ServiceAccount of plans/10-rbac.yaml.
	DefaultServiceAccount = "chart-upgrader"
	// DefaultSpecSecret is the Secret of plans/20-spec-secret.yaml.
	DefaultSpecSecret = "chart-upgrader-spec"
	// DefaultConcurrency: one node at a time.
	DefaultConcurrency = 1
	// DefaultWaitTimeout is chart-upgrader's default wait for one chart.
	DefaultWaitTimeout = 20 * time.Minute
	// DeadlineMargin is added to the wait (and drain) timeout to give the
	// Job's deadline: time to pull the image, resolve, load the charts,
	// merge, apply and verify.
	DeadlineMargin = 10 * time.Minute
	// DefaultDrainTimeout bounds `kubectl drain` with DefaultDrain.
	DefaultDrainTimeout = 10 * time.Minute
	// DefaultRunAs is the user and group of the upgrade container: a
	// non-root id of chart-upgrader's own. The Job shares the host's PID
	// namespace, where a process may signal every process of its user,
	// and the state directory belongs to it: no other process on the node
	// should run as this user.
	DefaultRunAs = "17017:17017"
)

// The contract with system-upgrade-controller and with `chart-upgrader
// upgrade` (the same values as in package phase, which this package does
// not import: it stays free of cluster clients).
const (
	// SecretsDir is where the controller mounts a Plan's secrets by default.
	SecretsDir = "/run/system-upgrade/secrets"
	// SpecKey is the key of the upgrade spec in the spec Secret.
	SpecKey = "spec.yaml"
	// SpecEnv names the upgrade spec file for `chart-upgrader upgrade`.
	SpecEnv = "CHART_UPGRADER_SPEC"
	// UpgradeCommand is what the upgrade container runs (the image's
	// entrypoint is chart-upgrader).
	UpgradeCommand = "upgrade"
)

// PrepareArgs are the arguments of the prepare container for the upgrade
// container's user and group runAs ("UID:GID"): `chart-upgrader host
// prepare` creates the state and lock directories under /host and gives
// them to that user.
func PrepareArgs(runAs string) []string { return []string{"host", "prepare", "--owner", runAs} }

// PlanOptions describe the Plan. The zero value of a field means its
// default; Name, Image and one of Version or Channel are required. Each
// field is named in errors as the `chart-upgrader plan` flag that sets it.
type PlanOptions struct {
	Name      string // --name: the Plan's name, a DNS-1123 label (it becomes part of a node label)
	Namespace string // --namespace: default DefaultNamespace

	// Image is the image repository WITHOUT a tag (--image): the controller
	// runs it tagged with the resolved version, so the chart version must
	// also be an image tag that exists.
	Image string
	// Version pins the chart version (--version); Channel follows a SUC
	// channel URL instead (--channel). Exactly one is required.
	Version, Channel string

	// NodeSelector is one label key=value a node must carry to run the
	// Job (--node-selector): default DefaultNodeSelector.
	NodeSelector string
	// SpecSecret names the Secret holding spec.yaml (--spec-secret),
	// mounted at SecretsDir/<name>: default DefaultSpecSecret.
	SpecSecret string
	// ServiceAccount runs the Job (--service-account): default
	// DefaultServiceAccount.
	ServiceAccount string
	// Concurrency is how many nodes run the Job at once (--concurrency):
	// default 1.
	Concurrency int64

	// Cordon cordons the node before the upgrade (--cordon). A chart
	// upgrade is cluster-wide and does not need it. The controller runs
	// kubectl for it as the Plan's ServiceAccount, which then needs the
	// RBAC to (plans/10-rbac.yaml does not grant it).
	Cordon bool
	// Drain drains the node before the upgrade (--drain: DefaultDrain);
	// nil does not. With Drain the controller cordons whatever Cordon says.
	Drain *DrainOptions

	// WaitTimeout is the longest `chart-upgrader upgrade` may wait for
	// readiness in one run (--wait-timeout): the sum of the spec's
	// wait.timeout over its charts. Default DefaultWaitTimeout. The Job's
	// deadline (jobActiveDeadlineSecs) is WaitTimeout + DeadlineMargin (+
	// the drain timeout): the controller's default of 600 s would kill the
	// Job in the middle of a wait.
	WaitTimeout time.Duration

	// Tolerations let the Job run on control-plane nodes: nil means
	// ControlPlaneTolerations(); an empty, non-nil slice means none.
	Tolerations []corev1.Toleration

	// RunAs is the "UID:GID" the upgrade container runs as (--run-as):
	// default DefaultRunAs. With a non-root UID the Plan has a prepare
	// container, root with CAP_CHOWN only, that makes the state and lock
	// directories this user's; "0:0" runs the upgrade as root without
	// capabilities and without a prepare container (see UpgradeContext).
	RunAs string
}

// DrainOptions are `kubectl drain` options, run by the controller in an
// init container before the upgrade.
type DrainOptions struct {
	Timeout                  time.Duration // --timeout of kubectl drain; 0: none (then the Job deadline bounds it)
	GracePeriod              *int32        // seconds; nil: each pod's own
	DeleteEmptydirData       bool          // evict pods with emptyDir volumes (their data is lost)
	IgnoreDaemonSets         bool          // leave DaemonSet pods alone (drain fails on them otherwise)
	Force                    bool          // also delete pods no controller manages
	SkipWaitForDeleteTimeout int           // seconds; 0: always wait for deleted pods
}

// DefaultDrain is what `chart-upgrader plan --drain` asks for: DaemonSets
// ignored, emptyDir pods evicted, no unmanaged pod deleted, at most
// DefaultDrainTimeout.
func DefaultDrain() *DrainOptions {
	return &DrainOptions{Timeout: DefaultDrainTimeout, DeleteEmptydirData: true, IgnoreDaemonSets: true}
}

// ControlPlaneTolerations tolerate the NoSchedule and NoExecute taints of
// control-plane nodes, under their current and their former name.
func ControlPlaneTolerations() []corev1.Toleration {
	var out []corev1.Toleration
	for _, key := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"} {
		for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
			out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
		}
	}
	return out
}

// SpecPath is where the upgrade container finds the upgrade spec of the
// Secret named secret.
func SpecPath(secret string) string { return path.Join(SecretsDir, secret, SpecKey) }

// Build validates opts and returns the Plan. Invalid options are an
// outcome.BadInput error holding one *OptionError per problem (errors.As
// finds the first), printed on one line.
func Build(opts PlanOptions) (*upgradev1.Plan, error) {
	o := opts.withDefaults()
	if errs := o.validate(); len(errs) > 0 {
		return nil, outcome.BadInput(errs)
	}
	key, value, _ := cutLabel(o.NodeSelector)
	owner, _ := host.ParseOwner(o.RunAs)
	mount := path.Join(SecretsDir, o.SpecSecret)
	plan := &upgradev1.Plan{
		TypeMeta:   metav1.TypeMeta{APIVersion: upgradev1.SchemeGroupVersion.String(), Kind: "Plan"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
		Spec: upgradev1.PlanSpec{
			Concurrency:           o.Concurrency,
			JobActiveDeadlineSecs: o.deadline(),
			NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
			ServiceAccountName:    o.ServiceAccount,
			Channel:               o.Channel,
			Version:               o.Version,
			Secrets:               []upgradev1.SecretSpec{{Name: o.SpecSecret, Path: mount}},
			Tolerations:           o.Tolerations,
			Cordon:                o.Cordon,
			Drain:                 o.Drain.spec(),
			Upgrade: &upgradev1.ContainerSpec{
				Image:           o.Image,
				Args:            []string{UpgradeCommand},
				Env:             []corev1.EnvVar{{Name: SpecEnv, Value: SpecPath(o.SpecSecret)}},
				SecurityContext: UpgradeContext(owner.UID, owner.GID),
			},
		},
	}
	if owner.UID != 0 {
		plan.Spec.Prepare = &upgradev1.ContainerSpec{
			Image:           o.Image,
			Args:            PrepareArgs(o.RunAs),
			SecurityContext: PrepareContext(),
		}
	}
	return plan, nil
}

// Render is Build, then Marshal.
func Render(opts PlanOptions) ([]byte, error) {
	plan, err := Build(opts)
	if err != nil {
		return nil, err
	}
	return Marshal(plan)
}

func (o PlanOptions) withDefaults() PlanOptions {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.NodeSelector == "" {
		o.NodeSelector = DefaultNodeSelector
	}
	if o.SpecSecret == "" {
		o.SpecSecret = DefaultSpecSecret
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = DefaultServiceAccount
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.Tolerations == nil {
		o.Tolerations = ControlPlaneTolerations()
	}
	if o.RunAs == "" {
		o.RunAs = DefaultRunAs
	}
	return o
}

// deadline is jobActiveDeadlineSecs, in whole seconds rounded up.
func (o PlanOptions) deadline() int64 {
	d := o.WaitTimeout + DeadlineMargin
	if o.Drain != nil {
		d += o.Drain.Timeout
	}
	return int64((d + time.Second - 1) / time.Second)
}

func (d *DrainOptions) spec() *upgradev1.DrainSpec {
	if d == nil {
		return nil
	}
	c := *d // the Plan must not share memory with the options
	s := &upgradev1.DrainSpec{
		DeleteEmptydirData:       &c.DeleteEmptydirData,
		IgnoreDaemonSets:         &c.IgnoreDaemonSets,
		Force:                    c.Force,
		SkipWaitForDeleteTimeout: c.SkipWaitForDeleteTimeout,
	}
	if c.GracePeriod != nil {
		g := *c.GracePeriod
		s.GracePeriod = &g
	}
	if c.Timeout > 0 {
		s.Timeout = &c.Timeout
	}
	return s
}
