package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/crds"
	"github.com/chart-upgrader/chart-upgrader/internal/gates"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/imagecheck"
	"github.com/chart-upgrader/chart-upgrader/internal/liveobjects"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/pods"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// names are the CLI's names of what a refusal withholds.
var names = upgrade.Names{Version: "--version", AllowDowngrade: "--allow-downgrade", Unpause: "--unpause"}

func (o Options) local() Local {
	return Local{Kubeconfig: o.Kubeconfig, HostRoot: o.HostRoot, StateDir: o.StateDir, LockFile: o.LockFile,
		TerminationLog: o.TerminationLog, Log: o.Log, Out: o.Out}
}

// session is what the charts of one run share: the host lock, the journal
// and the cluster clients.
type session struct {
	lock    *host.Lock
	store   *host.Store
	clients *cluster.Clients
	cluster *cluster.Cluster
	log     *slog.Logger
	// images asks the registries for the image check of every chart of
	// the run (one cache); nil checks none, noImages says why.
	images   *imagecheck.Puller
	noImages string
}

// crds is the session's client of CRDs (an upgrade's apply.crds, a
// rollback's restore): the process's clients, a CRD Helm created
// client-side handed over, the REST mapper reset once a CRD is applied;
// migrate as apply.crds says.
func (s *session) crds(migrate bool) *crds.Client {
	return &crds.Client{Dynamic: s.clients.Dynamic, Kube: s.clients.Kube, Log: s.log, Applied: s.clients.Mapper.Reset,
		Installers: []string{cluster.HelmFieldManager}, Migrate: migrate}
}

// openSession takes the host lock, opens the journal and the Lease
// identity kept in it, and builds the API clients.
// With no cluster to talk to (bad input), it writes nothing: the client
// configuration is read before the state directory is touched.
func openSession(ctx context.Context, l Local, node string, leaseDuration time.Duration) (*session, error) {
	cfg, err := cluster.RESTConfig(l.Kubeconfig)
	if err != nil {
		return nil, err
	}
	stateDir, lockFile := host.LocalPaths(l.HostRoot, l.StateDir, l.LockFile)
	if err := host.CheckWritable(stateDir, lockFile); err != nil {
		return nil, err
	}
	lock, err := host.Acquire(lockFile)
	if err != nil {
		return nil, err
	}
	s := &session{lock: lock, log: l.Log}
	if s.store, err = host.Open(stateDir); err != nil {
		s.close()
		return nil, err
	}
	identity, err := s.store.Identity(node)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("lease identity in %s: %w", stateDir, err)
	}
	wrapConfig(ctx, cfg)
	if s.clients, err = cluster.NewClients(cfg, l.Log); err != nil {
		s.close()
		return nil, err
	}
	s.cluster = &cluster.Cluster{Clients: s.clients, Identity: identity, LeaseDuration: leaseDuration,
		Kinds: targets.Kinds()}
	return s, nil
}

// close waits for the Events still being sent and the journal's last
// entries still being written (both go out while a run ends), then gives
// the host lock up.
func (s *session) close() {
	if s.cluster != nil {
		s.cluster.Flush()
	}
	if s.store != nil {
		if err := s.store.Flush(); err != nil && s.log != nil {
			// the run is done and its target says so; the next run on this
			// node looks at the target instead of this record
			s.log.Warn("could not write the journal's record of the finished run", "error", err.Error())
		}
	}
	_ = s.lock.Release()
}

// connect builds the API clients from a kubeconfig (see
// cluster.RESTConfig).
func connect(ctx context.Context, kubeconfig string, log *slog.Logger) (*cluster.Clients, error) {
	cfg, err := cluster.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	wrapConfig(ctx, cfg)
	return cluster.NewClients(cfg, log)
}

// rendererOf renders charts for the cluster of clients: with its
// capabilities, read once, when a chart is first rendered.
func rendererOf(c *cluster.Clients) chartpkg.Renderer {
	return chartpkg.Renderer{Capabilities: c.Capabilities}
}

// runner is the core's runner over this session's ports.
func (s *session) runner(ctx context.Context, set upgrade.Settings) *upgrade.Runner {
	set.Identity, set.Names = s.cluster.Identity, names
	return &upgrade.Runner{Cluster: s.cluster, Journal: wrapJournal(ctx, s.store), Settings: set}
}

// job is one chart of a spec as the core runs it: the target from the kind
// registry, its chart source and rules, the overrides, the wait timeout
// (timeout overrides the spec's when > 0), the pods' grace and the
// settle (podGrace and settle, when set, override the spec's).
func (s *session) job(ctx context.Context, c spec.Chart, caFile string, explicit Explicit, timeout time.Duration, podGrace, settle *time.Duration) (upgrade.Job, error) {
	tg, lease, err := openTarget(ctx, s.clients, c.Target, c.Options, c.Apply)
	if err != nil {
		return upgrade.Job{}, err
	}
	var revert upgrade.Reverter
	if rv, ok := tg.(upgrade.Reverter); ok {
		revert = rv
	}
	j := upgrade.Job{Target: wrapTarget(ctx, tg), Lease: lease, Revert: revert, ChartName: c.Chart.Name, Rules: c.Rules, Migrations: c.Migrations, Timeout: c.Wait.Timeout,
		FailureGrace: c.Wait.FailureGrace}
	if timeout > 0 {
		j.Timeout = timeout
	}
	if len(c.Wait.Health) > 0 {
		if j.Gates, err = s.gates(tg, c); err != nil {
			return upgrade.Job{}, err
		}
		j.Health = c.Wait.Health
	}
	if c.Apply.CRDs != "" {
		j.CRDs = crds.Port{Policy: crds.Policy(c.Apply.CRDs), Client: s.crds(c.Apply.MigrateCRDs)}
	}
	j.Images, j.NoImages = s.imagePort(tg, c)
	j.PodFailureGrace = c.Wait.PodFailureGrace
	if podGrace != nil {
		j.PodFailureGrace = *podGrace
	}
	j.Settle = c.Wait.Settle
	if settle != nil {
		j.Settle = *settle
	}
	if r, ok := tg.(gates.Released); ok {
		j.Pods = &pods.Port{Kube: s.clients.Kube, Target: r, Log: s.log,
			Releases: &helmrelease.Client{Kube: s.clients.Kube, Dynamic: s.clients.Dynamic, Log: s.log, RESTMapper: s.clients.Mapper}}
	}
	var src upgrade.ChartSource
	if c.Chart.Source != "" {
		if src, err = openSource(c.Chart.Source, caFile, rendererOf(s.clients)); err != nil {
			return upgrade.Job{}, fmt.Errorf("chart source of %s: %w", c.Target, err)
		}
	}
	if j.Source, err = targetSource(ctx, tg, src, rendererOf(s.clients)); err != nil {
		return upgrade.Job{}, err
	}
	if j.Overrides, err = Overrides(explicit); err != nil {
		return upgrade.Job{}, err
	}
	return j, nil
}

// imagePort is the image check of c on target t, or why there is none.
func (s *session) imagePort(t upgrade.Target, c spec.Chart) (upgrade.Images, string) {
	switch r, ok := t.(imagecheck.Rendered); {
	case s.images == nil:
		return nil, s.noImages
	case c.Images.Skip:
		return nil, "the spec says images.check: false"
	case !ok:
		return nil, fmt.Sprintf("a %s renders no release here", c.Target.Kind)
	default:
		declared := make([]imagecheck.Declared, len(c.Images.Values))
		for i, v := range c.Images.Values {
			declared[i] = imagecheck.Declared{Image: v.Image, Registry: v.Registry, Repository: v.Repository, Tag: v.Tag, Digest: v.Digest, At: v.At}
		}
		return &imagecheck.Port{Kube: s.clients.Kube, Puller: s.images, Target: r, Declared: declared, Discover: c.Images.Discover}, ""
	}
}

// openImages is the image check's puller for opts: the registries.yaml
// of --registries-config, else the node's under --host-root; nil, with
// why, for --skip-image-check. A registries.yaml that does not read is
// bad input.
func openImages(opts Options) (*imagecheck.Puller, string, error) {
	if opts.SkipImageCheck {
		return nil, "--skip-image-check", nil
	}
	var r *imagecheck.Registries
	var err error
	if opts.RegistriesConfig != "" {
		r, err = imagecheck.LoadRegistries(opts.RegistriesConfig, opts.HostRoot)
	} else {
		r, err = imagecheck.DefaultRegistries(opts.HostRoot)
	}
	if err != nil {
		return nil, "", fmt.Errorf("--registries-config: %w", err)
	}
	p := imagecheck.NewPuller(r, opts.ImageTimeout)
	p.HeadsFirst = opts.ImageHeadsFirst
	return p, "", nil
}

// gates is the port to the objects of c's health gates on target t.
func (s *session) gates(t upgrade.Target, c spec.Chart) (*gates.Port, error) {
	r, ok := t.(gates.Released)
	if !ok {
		return nil, outcome.BadInput(fmt.Errorf("%s: a %s takes no health gates (wait.health): it deploys no helm release on this cluster", c.Wait.Health[0].At, c.Target.Kind))
	}
	return &gates.Port{Dynamic: s.clients.Dynamic, Mapper: s.clients.Mapper, Log: s.log, Gates: c.Wait.Health, Target: r,
		Releases: &helmrelease.Client{Kube: s.clients.Kube, Dynamic: s.clients.Dynamic, Log: s.log, RESTMapper: s.clients.Mapper},
		Access:   &liveobjects.SelfAccess{Kube: s.clients.Kube}}, nil
}

// openTarget opens the target port of a spec target, with its kind's
// options (nil: the kind's defaults) and how it is applied, and names its Lease. The port is the
// adapter itself, whose optional interfaces the caller may ask for; a job
// runs it through wrapTarget.
func openTarget(_ context.Context, c *cluster.Clients, t spec.Target, opts any, apply kind.Apply) (upgrade.Target, string, error) {
	k, err := targets.Lookup("target "+t.String(), t.Kind)
	if err != nil {
		return nil, "", err
	}
	tg, err := targets.Open(c, upgrade.Ref{Kind: k.Name, Namespace: t.Namespace, Name: t.Name}, opts, apply)
	if err != nil {
		return nil, "", err
	}
	return tg, k.LeaseName(t.Name), nil
}
