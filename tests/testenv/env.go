package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/chart-upgrader/chart-upgrader/tests/crds"
)

// Client rate limits of Config: client-go's default (5 QPS) would make the
// tests measure throttling instead of Kubernetes.
const (
	QPS   = 1000
	Burst = 2000
)

// Options configure Start. The zero value is a plain control plane with the
// embedded CRDs.
type Options struct {
	// AuditLog turns on kube-apiserver's audit log: metadata of every
	// request, JSON lines, in a file named by Env.AuditLogPath.
	AuditLog bool
	// CRDDir, when set, installs the CRDs found there instead of the ones
	// embedded in package tests/crds.
	CRDDir string
	// ExtraCRDDir, when set, installs the CRDs found there as well (a
	// test package's operators' kinds: KubeVirt, Longhorn).
	ExtraCRDDir string
	// AssetsDir holds kube-apiserver and etcd; empty means FindAssets.
	AssetsDir string
	// Output, when set, receives the control plane's stdout and stderr.
	Output io.Writer
	// Workloads also runs kube-controller-manager, kube-scheduler and KWOK
	// with FakeNodes fake Nodes, so that Deployments, ReplicaSets,
	// StatefulSets, DaemonSets and Jobs run their course: pods are
	// scheduled and KWOK makes them Running and Ready (see HoldAnnotation),
	// no container runs. Off, nothing but etcd and kube-apiserver runs.
	Workloads bool
	// HelmController also runs k3s's helm-controller (it implies
	// Workloads: its Jobs need the Job controller): it installs its own
	// CRDs (HelmChart, HelmChartConfig) and handles HelmCharts of every
	// namespace. No klipper-helm runs: package tests/klipperhelm runs its
	// Jobs.
	HelmController bool
	// LogDir receives the logs of the workloads mode's components; empty
	// means a directory of the environment, removed by Stop.
	LogDir string
	// EtcdQuotaBytes raises etcd's space quota (default 2 GiB), for a
	// benchmark whose objects and their history pass it (50,000
	// BundleDeployments of real weight).
	EtcdQuotaBytes int64
}

// Env is a running control plane. Its methods are safe for concurrent use,
// except that StopAPIServer and StartAPIServer affect every user of it.
type Env struct {
	te         *envtest.Environment
	dir        string
	assets     string // the binaries (FindAssets)
	cfg        *rest.Config
	kubeconfig string
	auditLog   string
	kube       kubernetes.Interface
	dynamic    dynamic.Interface
	procs      []*process // the workloads mode's components
	nodes      []string   // the workloads mode's fake Nodes
	extraNodes int        // fake Nodes added by AddFakeNode (guarded by mu)
	logDir     string     // the workloads mode's logs

	mu      sync.Mutex // guards stopped and the API server process
	stopped bool
}

// Start launches etcd and kube-apiserver, installs the CRDs and waits until
// they are served. On error nothing is left running. The caller must call
// Stop: the processes outlive this one otherwise.
func Start(ctx context.Context, opts Options) (*Env, error) {
	assets := opts.AssetsDir
	if assets == "" {
		var err error
		if assets, err = FindAssets(ctx); err != nil {
			return nil, fmt.Errorf("finding the control plane binaries: %w", err)
		}
	}
	if opts.HelmController {
		opts.Workloads = true
	}
	if opts.Workloads {
		if err := checkWorkloadAssets(assets); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "chart-upgrader-testenv-")
	if err != nil {
		return nil, fmt.Errorf("creating the test environment directory: %w", err)
	}
	env := &Env{dir: dir, assets: assets, kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := env.start(ctx, opts, assets); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return env, nil
}

func (e *Env) start(ctx context.Context, opts Options, assets string) error {
	// A fixed CertDir keeps the serving and client CAs across an API server
	// restart (envtest regenerates them when it owns the directory).
	certDir := filepath.Join(e.dir, "apiserver")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return fmt.Errorf("creating the API server directory: %w", err)
	}
	apiServer := &envtest.APIServer{CertDir: certDir, Out: opts.Output, Err: opts.Output}
	// Open watches would otherwise hold a stopping server for a minute.
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "1s")
	if opts.AuditLog {
		policy := filepath.Join(e.dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return fmt.Errorf("writing the audit policy: %w", err)
		}
		e.auditLog = filepath.Join(e.dir, "audit.log")
		apiServer.Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", e.auditLog).
			Set("audit-log-format", "json").
			Set("audit-log-mode", "blocking").
			// never rotated (the default rotates at 100 MB, which a
			// rollout over 10,000 BundleDeployments passes): request
			// counts read the one file
			Set("audit-log-maxsize", "1000000")
	}
	e.te = &envtest.Environment{
		ControlPlane:          envtest.ControlPlane{APIServer: apiServer, Etcd: &envtest.Etcd{Out: opts.Output, Err: opts.Output}},
		BinaryAssetsDirectory: assets,
		ErrorIfCRDPathMissing: true,
	}
	// envtest prefers $KUBEBUILDER_ASSETS over BinaryAssetsDirectory.
	apiServer.Path = filepath.Join(assets, "kube-apiserver")
	e.te.ControlPlane.Etcd.Path = filepath.Join(assets, "etcd")
	if opts.EtcdQuotaBytes > 0 {
		e.te.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.FormatInt(opts.EtcdQuotaBytes, 10))
	}
	if opts.CRDDir != "" {
		e.te.CRDDirectoryPaths = []string{opts.CRDDir}
	} else {
		all, err := crds.Load()
		if err != nil {
			return fmt.Errorf("loading the embedded CRDs: %w", err)
		}
		e.te.CRDs = all
	}
	if opts.ExtraCRDDir != "" {
		e.te.CRDDirectoryPaths = append(e.te.CRDDirectoryPaths, opts.ExtraCRDDir)
	}
	cfg, err := e.te.Start()
	if err != nil {
		return fmt.Errorf("starting the control plane from %s: %w", assets, err)
	}
	e.cfg = rest.CopyConfig(cfg)
	e.cfg.QPS, e.cfg.Burst = QPS, Burst
	if err := os.WriteFile(e.kubeconfig, e.te.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	if e.kube, err = kubernetes.NewForConfig(e.cfg); err != nil {
		return fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	if e.dynamic, err = dynamic.NewForConfig(e.cfg); err != nil {
		return fmt.Errorf("creating the dynamic client: %w", err)
	}
	if err := e.waitServing(ctx); err != nil {
		return err
	}
	if !opts.Workloads {
		return nil
	}
	if err := e.startWorkloads(ctx, opts, assets, certDir); err != nil {
		return err
	}
	if opts.HelmController {
		return e.startHelmController(ctx, opts, assets)
	}
	return nil
}

// Config returns a copy of the admin client configuration, with QPS and
// Burst raised (see the constants).
func (e *Env) Config() *rest.Config { return rest.CopyConfig(e.cfg) }

// Binary returns the path of a binary scripts/testenv built (kubectl,
// helm3, helm4, …), or an error naming what is missing.
func (e *Env) Binary(name string) (string, error) {
	path := filepath.Join(e.assets, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is not among the test binaries (run scripts/testenv): %w", name, err)
	}
	return path, nil
}

// Kubectl runs the real kubectl against the API server, as an operator
// would (its field manager is kubectl's own: "kubectl-set",
// "kubectl-patch"…); the error carries its output.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := e.Binary("kubectl")
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", e.KubeconfigPath()}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// StoresNothing says whether a request (its URI, path and query) writes
// nothing though its verb does: a server-side dry run, or a question
// about this client's own permissions (a SelfSubjectAccessReview). The
// conflict check makes both; tests that count writes leave them out.
func StoresNothing(requestURI string) bool {
	return strings.Contains(requestURI, "dryRun=All") || strings.Contains(requestURI, "/selfsubjectaccessreviews")
}

// HelmCLIEnv is the environment that keeps a Helm CLI's configuration,
// cache and data under home (not the user's ~/.config/helm and the like).
func HelmCLIEnv(home string) []string {
	return []string{"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data")}
}

// KubeconfigPath is a kubeconfig file for the admin user, for subprocesses
// and Helm. It stays valid across API server restarts.
func (e *Env) KubeconfigPath() string { return e.kubeconfig }

// AuditLogPath is the audit log file, or "" when Options.AuditLog was off.
func (e *Env) AuditLogPath() string { return e.auditLog }

// Kube is a typed client built from Config.
func (e *Env) Kube() kubernetes.Interface { return e.kube }

// Dynamic is a dynamic client built from Config.
func (e *Env) Dynamic() dynamic.Interface { return e.dynamic }

// Host is the API server URL; it does not change across restarts.
func (e *Env) Host() string { return e.cfg.Host }

// StopAPIServer stops kube-apiserver and waits until it has exited. etcd
// keeps running with all data. Requests fail until StartAPIServer.
func (e *Env) StopAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("stopping the API server: the environment is stopped")
	}
	if err := e.te.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("stopping the API server: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address with the same certificates and flags, and returns once it
// serves the CRDs again. Clients created before keep working.
func (e *Env) StartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("starting the API server: the environment is stopped")
	}
	if err := e.te.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("starting the API server again on %s: %w", e.cfg.Host, err)
	}
	return e.waitServing(ctx)
}

// waitServing returns once the API server lists ManagedCharts, within 2
// minutes (a loaded 2-core machine takes more than 30 s to establish CRDs).
// A freshly started server offers no watch to wait on, so this polls.
func (e *Env) waitServing(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			_, err := e.dynamic.Resource(ManagedChartsGVR).List(ctx, listOne)
			return err == nil, nil
		})
	if err != nil {
		return fmt.Errorf("waiting for the API server at %s to serve ManagedCharts: %w", e.cfg.Host, err)
	}
	return nil
}

// Stop stops the workloads mode's components, kube-apiserver and etcd and
// removes their data. It is safe to call more than once.
func (e *Env) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	var errs []error
	if err := e.stopWorkloads(); err != nil {
		errs = append(errs, fmt.Errorf("stopping the workloads mode: %w", err))
	}
	if e.te != nil {
		if err := e.te.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		}
	}
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", e.dir, err))
	}
	return errors.Join(errs...)
}

// WaitOpenAPI waits until the API server publishes the OpenAPI v3 schema
// of gv: a new CRD's comes a moment after it is established, and a
// conflict check or drift before then finds no schema for its kind.
func (e *Env) WaitOpenAPI(ctx context.Context, gv schema.GroupVersion) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		paths, err := e.Kube().Discovery().OpenAPIV3().Paths()
		if err != nil {
			return false, nil
		}
		_, ok := paths["apis/"+gv.Group+"/"+gv.Version]
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("the OpenAPI v3 schema of %s: %w", gv, err)
	}
	return nil
}
