package app

import (
	"io"
	"log/slog"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
)

// Local is what every cluster command shares: how to reach the cluster,
// and where this node keeps its records.
type Local struct {
	Kubeconfig     string
	HostRoot       string // the node's / (SUC mounts it at /host)
	StateDir       string
	LockFile       string
	TerminationLog string

	Log *slog.Logger
	Out io.Writer // the decision table, reports and summaries
}

// Options are the inputs of upgrade and preflight.
type Options struct {
	// what to upgrade: a spec file, or one target with its chart source
	SpecFile    string
	Target      string // KIND/NAMESPACE/NAME
	ChartSource string // directory or Helm repository URL
	ChartName   string // default: the chart the target deploys
	PolicyFile  string
	// CRDs and MigrateCRDs are the chart's apply.crds with --target
	// (--crds, --crds-migrate); CRDsSet says --crds was given.
	CRDs        string
	CRDsSet     bool
	MigrateCRDs bool
	Explicit    Explicit      // -f and the --set family
	Version     string        // --version, else $SYSTEM_UPGRADE_PLAN_LATEST_VERSION
	Timeout     time.Duration // overrides the spec's wait timeout when > 0
	// PodFailureGrace overrides the spec's wait.podFailureGrace when set
	// (--pod-failure-grace; 0: off).
	PodFailureGrace *time.Duration
	// Settle overrides the spec's wait.settle when set (--settle; 0: off).
	Settle *time.Duration

	AllowDowngrade    bool
	Unpause           bool
	RequireNodesReady bool

	Kubeconfig     string
	HostRoot       string
	StateDir       string
	LockFile       string
	TerminationLog string
	NodeName       string
	LeaseDuration  time.Duration

	// CAFile holds extra CA certificates for Helm repository URLs.
	CAFile string

	// RegistriesConfig is the node's registries.yaml the image check
	// resolves pulls with ("": the node's under HostRoot, if any);
	// SkipImageCheck checks no image; ImageTimeout bounds each registry
	// endpoint's answer (0: imagecheck.DefaultTimeout); ImageHeadsFirst
	// asks each manifest with a HEAD (imagecheck.Puller.HeadsFirst).
	RegistriesConfig string
	SkipImageCheck   bool
	ImageTimeout     time.Duration
	ImageHeadsFirst  bool

	// SecretsDir is where system-upgrade-controller mounts the Plan's
	// secrets: without SpecFile and Target, the spec is found there.
	SecretsDir string
	// SUC identifies the Job that runs this process, for logs and Events.
	SUC host.SUC

	// HooksDir holds pre-<step> and post-<step> executables (default: the
	// directory of a spec found in the Plan's secret); HookTimeout bounds
	// each (default 5m).
	HooksDir    string
	HookTimeout time.Duration

	Log *slog.Logger
	Out io.Writer
	// Heartbeat is how often progress is printed while nothing changes.
	Heartbeat time.Duration
	// Output is preflight's -o: table (the decision table and a line),
	// diff (and, after it, the change of each object), json (one object
	// per chart: the decisions and the changes).
	Output string
}

func (o *Options) defaults() {
	o.Log, o.Out = logAndOut(o.Log, o.Out)
	if attrs := o.SUC.Attrs(); len(attrs) > 0 {
		o.Log = o.Log.With(attrs...)
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 30 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.HookTimeout <= 0 {
		o.HookTimeout = host.DefaultHookTimeout
	}
}

func logAndOut(log *slog.Logger, out io.Writer) (*slog.Logger, io.Writer) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if out == nil {
		out = io.Discard
	}
	return log, out
}
