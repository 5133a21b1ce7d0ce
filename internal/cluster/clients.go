package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Clients are the API clients of a run. The discovery-backed mapper is
// built on first use, so a run that reads no live object makes no
// discovery request.
type Clients struct {
	Config  *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  *restmapper.DeferredDiscoveryRESTMapper
	// Log receives what the clients have to say while they work (a broken
	// watch).
	Log *slog.Logger

	// discovery is the cached discovery the mapper and Capabilities share:
	// read once per run.
	discovery discovery.CachedDiscoveryInterface
	capsOnce  sync.Once
	caps      *common.Capabilities
	capsErr   error
}

// RESTConfig loads the API client configuration: --kubeconfig, else
// $KUBECONFIG, else the in-cluster service account, else ~/.kube/config.
// Client-side throttling is raised: the default 5 QPS turns a watch-driven
// wait into a 200 ms poll.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err))
		}
	case os.Getenv("KUBECONFIG") != "":
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("$KUBECONFIG %s: %w", os.Getenv("KUBECONFIG"), err))
		}
	default:
		cfg, err = rest.InClusterConfig()
		if err != nil {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
			if clientcmd.IsEmptyConfig(err) {
				// client-go's own words name a variable nothing here reads
				return nil, outcome.BadInput(errors.New("no cluster access: not in a cluster, and no --kubeconfig, $KUBECONFIG or ~/.kube/config: give --kubeconfig FILE (or set KUBECONFIG)"))
			}
			if err != nil {
				return nil, outcome.BadInput(fmt.Errorf("no cluster access: not in a cluster, and ~/.kube/config: %w; give --kubeconfig FILE (or set KUBECONFIG)", err))
			}
		}
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "chart-upgrader"
	return cfg, nil
}

// NewClients builds the clients of a run; log receives what the clients
// have to say while they work (a broken watch).
func NewClients(cfg *rest.Config, log *slog.Logger) (*Clients, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(disc)
	return &Clients{Config: cfg, Kube: kube, Dynamic: dyn, Log: log, discovery: cached,
		Mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached)}, nil
}

// Capabilities are the cluster's as Helm reads them before it renders an
// install or upgrade (its Kubernetes version and served API versions),
// read once per run from the discovery the mapper shares: every render of
// the run (preflight, the conflict check, drift, provenance) renders as
// the applier will.
func (c *Clients) Capabilities() (*common.Capabilities, error) {
	c.capsOnce.Do(func() {
		if c.discovery == nil {
			c.discovery = memory.NewMemCacheClient(c.Kube.Discovery())
		}
		v, err := c.discovery.ServerVersion()
		if err != nil {
			c.capsErr = fmt.Errorf("reading the cluster's Kubernetes version: %w", err)
			return
		}
		versions, err := action.GetVersionSet(c.discovery)
		if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
			c.capsErr = fmt.Errorf("reading the cluster's API versions: %w", err)
			return
		}
		c.caps = &common.Capabilities{APIVersions: versions, HelmVersion: common.DefaultCapabilities.HelmVersion,
			KubeVersion: common.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor}}
	})
	return c.caps, c.capsErr
}
