package fleetsim

import (
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// ChartLoader returns chart name at version: what Rancher fetches from the
// ClusterRepo. It is called for every deployment, so it may return a fresh
// copy each time (Helm may modify the chart it is given).
type ChartLoader func(ctx context.Context, name, version string) (*chart.Chart, error)

// The resources the simulator reads and writes.
var (
	ManagedChartsGVR     = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "managedcharts"}
	BundlesGVR           = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundles"}
	BundleDeploymentsGVR = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundledeployments"}
)

// Options configure a simulator.
type Options struct {
	// Config reaches the API server (required). Its rate limit is raised to
	// at least 1000 QPS / 2000 burst; the user agent defaults to "fleetsim".
	Config *rest.Config
	// Loader loads charts (required).
	Loader ChartLoader
	// Namespace restricts the simulator to the ManagedCharts of one
	// namespace; empty serves all namespaces.
	Namespace string
	// Clusters is the number of simulated target clusters (default 1). The
	// first one, "local", is the API server itself, where Helm runs.
	Clusters int
	// Workers per controller (default 16).
	Workers int
	// Logger receives the simulator's log (default: discarded).
	Logger *slog.Logger
	// RetryBackoff is how long the agent waits before it retries a failed
	// deployment the first time (default 1s); each further attempt waits
	// twice as long, up to a minute.
	RetryBackoff time.Duration
	// DriftDelay is how long after a change of a deployed object the agent
	// checks it for drift (default 5s, the sleep of Fleet's drift trigger).
	DriftDelay time.Duration
	// LiveReadiness makes the local cluster's agent judge a deployment
	// ready from the live objects of its Helm release, by kstatus (as
	// Fleet's agent judges them from their status), looking again every
	// LiveReadinessEvery (default 250ms) until they are; the objects not
	// ready are its nonReadyStatus. For a control plane whose workloads
	// run (tests/testenv's workloads mode). Off, readiness follows
	// Fault.Delay alone.
	LiveReadiness      bool
	LiveReadinessEvery time.Duration
}

// maxRetryBackoff caps the agent's back-off between retries.
const maxRetryBackoff = time.Minute

// Sim is a running Rancher + Fleet simulator. Create it with New, run it
// with Run. Its methods are safe for concurrent use.
type Sim struct {
	opts   Options
	client dynamic.Interface
	kube   kubernetes.Interface
	helm   *helmRunner
	log    *slog.Logger
	// live judges the live objects of a release (LiveReadiness)
	live *helmrelease.Client

	factories []dynamicinformer.DynamicSharedInformerFactory
	mcs       cache.SharedIndexInformer
	bundles   cache.SharedIndexInformer
	bds       cache.SharedIndexInformer

	mcQueue, bundleQueue, agentQueue workqueue.TypedRateLimitingInterface[string]
	fresh                            *freshCache

	synced  chan struct{}
	runOnce sync.Once

	mu         sync.Mutex
	faults     map[string]Fault
	helmRuns   map[string]int
	ready      map[string]ReadyTimes
	applied    map[string]applied            // BundleDeployment key → what the agent applied
	failures   map[string]failure            // BundleDeployment key → its failed deployment
	driftStops map[string]context.CancelFunc // BundleDeployment key → stops its drift watch
	releases   map[string]releaseRef         // BundleDeployment key → Helm release it owns
	defined    map[string]string             // ManagedChart key → why it is not Defined
	races      map[string]time.Time          // Bundle key → until when its status race (Fault.StatusRace) holds
	nsExists   map[string]bool
	// rendered holds, per deploymentID, the objects it renders: what every
	// downstream cluster reports in status.resources (rendered once).
	rendered map[string][]resourceKey
}

// bundleIndex indexes BundleDeployments by "<bundle namespace>/<bundle name>".
const bundleIndex = "bundle"

// New builds a simulator; nothing runs until Run.
func New(opts Options) (*Sim, error) {
	if opts.Config == nil || opts.Loader == nil {
		return nil, errors.New("creating the Fleet simulator: Options.Config and Options.Loader are required")
	}
	if opts.Clusters <= 0 {
		opts.Clusters = 1
	}
	if opts.DriftDelay <= 0 {
		opts.DriftDelay = 5 * time.Second
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := rest.CopyConfig(opts.Config)
	cfg.QPS, cfg.Burst = max(cfg.QPS, 1000), max(cfg.Burst, 2000)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "fleetsim"
	}
	s := &Sim{
		opts: opts, log: opts.Logger, synced: make(chan struct{}),
		faults: map[string]Fault{}, helmRuns: map[string]int{}, ready: map[string]ReadyTimes{},
		applied: map[string]applied{}, failures: map[string]failure{}, driftStops: map[string]context.CancelFunc{}, releases: map[string]releaseRef{}, defined: map[string]string{}, races: map[string]time.Time{},
		nsExists: map[string]bool{}, rendered: map[string][]resourceKey{}, fresh: newFreshCache(),
	}
	var err error
	if s.client, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("creating the simulator's dynamic client: %w", err)
	}
	if s.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("creating the simulator's client: %w", err)
	}
	if s.helm, err = newHelmRunner(cfg, s.log); err != nil {
		return nil, err
	}
	s.live = &helmrelease.Client{Kube: s.kube, Dynamic: s.client, Log: s.log}
	if s.opts.LiveReadinessEvery <= 0 {
		s.opts.LiveReadinessEvery = 250 * time.Millisecond
	}
	limiter := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, time.Second)
	}
	s.mcQueue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "managedcharts"})
	s.bundleQueue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "bundles"})
	s.agentQueue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "agent"})
	if err := s.setupInformers(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sim) setupInformers() error {
	ns := s.opts.Namespace
	mcF := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.client, 0, ns, nil)
	bdNS, selector := "", LabelBundleNamespace
	if ns != "" {
		bdNS, selector = ClusterNamespace(ns), LabelBundleNamespace+"="+ns
	}
	bdF := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.client, 0, bdNS, func(o *metav1.ListOptions) {
		o.LabelSelector = selector
	})
	s.factories = []dynamicinformer.DynamicSharedInformerFactory{mcF, bdF}
	s.mcs = mcF.ForResource(ManagedChartsGVR).Informer()
	s.bundles = mcF.ForResource(BundlesGVR).Informer()
	s.bds = bdF.ForResource(BundleDeploymentsGVR).Informer()
	if err := s.bds.AddIndexers(cache.Indexers{bundleIndex: func(obj any) ([]string, error) {
		l := obj.(*unstructured.Unstructured).GetLabels()
		return []string{key(l[LabelBundleNamespace], l[LabelBundleName])}, nil
	}}); err != nil {
		return fmt.Errorf("indexing BundleDeployments: %w", err)
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		// Status writes (the simulator's own) change no generation.
		{s.mcs, s.onChange(ManagedChartsGVR, func(_ *unstructured.Unstructured, k string, specChanged bool) {
			if specChanged {
				s.mcQueue.Add(k)
			}
		})},
		{s.bundles, s.onChange(BundlesGVR, func(_ *unstructured.Unstructured, k string, specChanged bool) {
			if specChanged {
				s.bundleQueue.Add(k)
			}
		})},
		{s.bds, s.onChange(BundleDeploymentsGVR, func(u *unstructured.Unstructured, k string, specChanged bool) {
			if specChanged {
				s.agentQueue.Add(k)
			}
			l := u.GetLabels()
			s.bundleQueue.Add(key(l[LabelBundleNamespace], l[LabelBundleName]))
		})},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("watching: %w", err)
		}
	}
	return nil
}

// Run runs the simulator until ctx is done, then stops its workers and
// returns nil. It fails if the caches cannot sync. Call it once.
func (s *Sim) Run(ctx context.Context) error {
	err := errors.New("running the Fleet simulator: Run was already called")
	s.runOnce.Do(func() { err = s.run(ctx) })
	return err
}

func (s *Sim) run(ctx context.Context) error {
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	defer func() {
		for _, f := range s.factories {
			f.Shutdown()
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), s.mcs.HasSynced, s.bundles.HasSynced, s.bds.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("running the Fleet simulator: caches did not sync")
	}
	close(s.synced)
	var wg sync.WaitGroup
	for range s.opts.Workers {
		wg.Go(func() { s.work(ctx, s.mcQueue, "managedchart", s.syncManagedChart) })
		wg.Go(func() { s.work(ctx, s.bundleQueue, "bundle", s.syncBundle) })
		wg.Go(func() { s.work(ctx, s.agentQueue, "agent", s.syncAgent) })
	}
	<-ctx.Done()
	s.mcQueue.ShutDown()
	s.bundleQueue.ShutDown()
	s.agentQueue.ShutDown()
	wg.Wait()
	return nil
}

// Start creates a simulator, runs it in the background and returns once it
// has synced. stop ends it and returns once Run has; calling it again does
// nothing. The simulator runs until stop, whatever becomes of ctx, which
// bounds only the wait for the sync.
func Start(ctx context.Context, opts Options) (sim *Sim, stop func(), err error) {
	if sim, err = New(opts); err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sim.Run(runCtx) }()
	stop = func() { cancel(); <-done }
	if err := sim.WaitForSync(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return sim, stop, nil
}

// WaitForSync returns once Run has filled its caches and started working,
// or with ctx's error.
func (s *Sim) WaitForSync(ctx context.Context) error {
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the Fleet simulator to sync: %w", ctx.Err())
	}
}

func (s *Sim) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], what string, sync func(context.Context, string) error) {
	for {
		k, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := sync(ctx, k); err != nil && ctx.Err() == nil {
			s.log.Info("retrying", "controller", what, "key", k, "err", err)
			q.AddRateLimited(k)
		} else {
			q.Forget(k)
		}
		q.Done(k)
	}
}

// touchChart re-evaluates everything of one ManagedChart.
func (s *Sim) touchChart(ns, name string) {
	s.mcQueue.Add(key(ns, name))
	bk := key(ns, BundleName(name))
	s.bundleQueue.Add(bk)
	objs, _ := s.bds.GetIndexer().ByIndex(bundleIndex, bk)
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		s.agentQueue.Add(key(u.GetNamespace(), u.GetName()))
	}
}

// onChange calls f for every event of a resource, saying whether the
// object was added or deleted or its spec changed (its generation). On a
// deletion it first forgets the simulator's own last write of the object.
// Informers that drop events (ResourceVersion too old) end with a fresh list,
// which is reported as additions and deletions, so nothing is lost.
func (s *Sim) onChange(gvr schema.GroupVersionResource, f func(u *unstructured.Unstructured, k string, specChanged bool)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { callWith(obj, func(u *unstructured.Unstructured, k string) { f(u, k, true) }) },
		UpdateFunc: func(old, obj any) {
			o, n := old.(*unstructured.Unstructured), obj.(*unstructured.Unstructured)
			changed := o.GetGeneration() != n.GetGeneration() || n.GetDeletionTimestamp() != nil
			callWith(obj, func(u *unstructured.Unstructured, k string) { f(u, k, changed) })
		},
		DeleteFunc: func(obj any) {
			callWith(obj, func(u *unstructured.Unstructured, k string) {
				s.fresh.forget(gvr, k)
				f(u, k, true)
			})
		},
	}
}

func callWith(obj any, f func(*unstructured.Unstructured, string)) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		f(u, key(u.GetNamespace(), u.GetName()))
	}
}
