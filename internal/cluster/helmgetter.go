package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"sync"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// HelmFieldManager is the field manager chart-upgrader applies as, through
// Helm's SDK: Helm's own, the one the Helm CLI (v3 and v4) and klipper-helm
// use, so that `helm upgrade` and `helm rollback` carry on after the tool
// without a field-manager conflict. (Helm's SDK would otherwise name the
// manager after the binary.)
const HelmFieldManager = "helm"

func init() { kube.ManagedFieldsManager = HelmFieldManager }

// SecretDriver is Helm's default storage driver, by the name Helm's
// configuration takes: a release's records are Secrets. The plain
// releases, Fleet's and (unless a HelmChart says otherwise)
// klipper-helm's are kept so.
const SecretDriver = "secret"

// HelmConfiguration is Helm's action configuration for the releases of
// namespace, kept by storage driver ("secret" as Helm's default,
// "configmap"), over getter. Helm's own logs go to log at debug level as
// component=helm; nil discards them.
func HelmConfiguration(getter *HelmGetter, namespace, driver string, log *slog.Logger) (*action.Configuration, error) {
	h := slog.Handler(slog.NewTextHandler(io.Discard, nil))
	if log != nil {
		h = log.With("component", "helm").Handler()
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(h))
	if err := cfg.Init(getter.For(namespace), namespace, driver); err != nil {
		return nil, fmt.Errorf("setting up Helm for namespace %s: %w", namespace, err)
	}
	return cfg, nil
}

// HelmGetter gives Helm's SDK (action.Configuration.Init) the API server
// of a *rest.Config: one discovery cache and REST mapper, shared by every
// namespace it is asked for. Reset drops what discovery learnt, for a
// chart that brings CRDs.
type HelmGetter struct {
	cfg    *rest.Config
	once   sync.Once
	err    error
	disc   discovery.CachedDiscoveryInterface
	mapper meta.ResettableRESTMapper
}

// NewHelmGetter returns the getter of cfg; nothing is requested yet.
func NewHelmGetter(cfg *rest.Config) *HelmGetter { return &HelmGetter{cfg: rest.CopyConfig(cfg)} }

func (g *HelmGetter) init() error {
	g.once.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(g.cfg)
		if err != nil {
			g.err = err
			return
		}
		g.disc = memory.NewMemCacheClient(dc)
		g.mapper = restmapper.NewDeferredDiscoveryRESTMapper(g.disc)
	})
	return g.err
}

// Reset forgets the kinds discovery found.
func (g *HelmGetter) Reset() {
	if g.init() == nil {
		g.disc.Invalidate()
		g.mapper.Reset()
	}
}

// For is the getter for one namespace, as Helm's
// action.Configuration.Init takes it.
func (g *HelmGetter) For(namespace string) *NamespacedHelmGetter {
	return &NamespacedHelmGetter{g: g, namespace: namespace}
}

// NamespacedHelmGetter is a HelmGetter for one namespace
// (genericclioptions.RESTClientGetter).
type NamespacedHelmGetter struct {
	g         *HelmGetter
	namespace string
}

// ToRESTConfig is a copy of the config.
func (n *NamespacedHelmGetter) ToRESTConfig() (*rest.Config, error) {
	return rest.CopyConfig(n.g.cfg), nil
}

// ToDiscoveryClient is the shared discovery cache.
func (n *NamespacedHelmGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if err := n.g.init(); err != nil {
		return nil, err
	}
	return n.g.disc, nil
}

// ToRESTMapper is the shared mapper.
func (n *NamespacedHelmGetter) ToRESTMapper() (meta.RESTMapper, error) {
	if err := n.g.init(); err != nil {
		return nil, err
	}
	return n.g.mapper, nil
}

// ToRawKubeConfigLoader names the server and the namespace (Helm reads
// the namespace from it).
func (n *NamespacedHelmGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["api"] = &clientcmdapi.Cluster{Server: n.g.cfg.Host}
	cfg.Contexts["api"] = &clientcmdapi.Context{Cluster: "api", Namespace: n.namespace}
	cfg.CurrentContext = "api"
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{})
}
