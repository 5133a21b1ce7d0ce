package phase

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// Options are the inputs of a cluster command, as the CLI gathers them.
type Options struct {
	// what to upgrade: a spec file, or one target with its chart source
	SpecFile    string
	Target      string // managedchart/NAMESPACE/NAME
	ChartSource string // directory or Helm repository URL
	ChartName   string // default: the ManagedChart's spec.chart
	PolicyFile  string
	Set         []string
	Files       []string
	Version     string        // --version, else $SYSTEM_UPGRADE_PLAN_LATEST_VERSION
	Timeout     time.Duration // overrides the spec's wait timeout when > 0

	AllowDowngrade    bool
	Unpause           bool
	RequireNodesReady bool

	// cluster access and local records
	Kubeconfig     string
	HostRoot       string // the node's / (SUC mounts it at /host)
	StateDir       string
	LockFile       string
	TerminationLog string
	NodeName       string
	LeaseDuration  time.Duration

	// chart repositories
	CAFile string

	// SecretsDir is where system-upgrade-controller mounts the Plan's
	// secrets: without --spec and --target, the spec is found there.
	SecretsDir string
	// SUC identifies the Job that runs this process, for logs and Events.
	SUC SUC

	// HooksDir holds pre-<phase> and post-<phase> executables (default: the
	// directory of a spec found in the Plan's secret); HookTimeout bounds
	// each (default 5m).
	HooksDir    string
	HookTimeout time.Duration

	Log *slog.Logger
	Out io.Writer // the decision table and summaries
	// WrapTransport wraps the API client transport (tests count requests).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Heartbeat is how often progress is printed while nothing changes.
	Heartbeat time.Duration
	// BeforeUpdate, when set, runs before each write of the target: a test
	// seam to change the target between our read and our write.
	BeforeUpdate func(ctx context.Context, attempt int)
}

func (o *Options) defaults() {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if attrs := o.SUC.attrs(); len(attrs) > 0 {
		o.Log = o.Log.With(attrs...)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 30 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
}
