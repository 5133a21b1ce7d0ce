package testenv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// HoldAnnotation, on a Pod (for a workload: on its pod template), tells
// KWOK in the workloads mode to hold the pod in a state instead of making it
// Running and Ready. Its values are HoldNotReady, HoldFail and HoldPull; any other
// value is ignored.
const HoldAnnotation = "testenv.chart-upgrader.io/hold"

const (
	// HoldNotReady: the pod becomes Running with its containers started, but
	// never Ready (condition Ready False, reason ContainersNotReady), like a
	// pod whose readiness probe keeps failing. A Job's pod never finishes.
	HoldNotReady = "not-ready"
	// HoldFail: a Job's pod fails (phase Failed, exit code 1) once Running;
	// any other pod is held as with HoldNotReady.
	HoldFail = "fail"
	// HoldPull: KWOK leaves the pod Pending; the test kubelet of package
	// tests/kubelet decides its image pulls, then takes the hold off (KWOK
	// runs it) or reports ErrImagePull and ImagePullBackOff as a kubelet
	// does.
	HoldPull = "pull"
)

// ReleaseHold removes the hold annotation from pod namespace/name: KWOK
// then lets it go on (a Job's pod completes).
func ReleaseHold(ctx context.Context, kube kubernetes.Interface, namespace, pod string) error {
	_, err := kube.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+HoldAnnotation+`":null}}}`), metav1.PatchOptions{})
	return err
}

// KWOKNodeAnnotation marks the Nodes KWOK manages (value "fake"); the fake
// Nodes of the workloads mode carry it. A Node without it is left alone.
const KWOKNodeAnnotation = "kwok.x-k8s.io/node"

// FakeNodes is how many fake Nodes the workloads mode creates, named
// kwok-node-0, kwok-node-1, …, each with 32 CPUs, 256 GiB of memory and
// room for 110 pods.
const FakeNodes = 3

// kwokStages is KWOK's configuration: the node and pod stages.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// controllers are the kube-controller-manager controllers of the workloads
// mode: the workload controllers, garbage collection, namespace deletion,
// service accounts, endpoints and resource quotas (their status.used). Not the node lifecycle controller (the
// fake Nodes never go NotReady) nor any cloud, volume or certificate one.
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"job-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
	"garbage-collector-controller",
	"pod-garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"disruption-controller",
	"resourcequota-controller",
}

// workloadBinaries are what the workloads mode runs beyond envtest's.
var workloadBinaries = []string{"kube-controller-manager", "kube-scheduler", "kwok"}

// schedulerConfig is kube-scheduler's configuration; %s is the kubeconfig.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`

// startWorkloads starts kube-controller-manager, kube-scheduler and KWOK
// against the running API server, creates the fake Nodes and returns once
// a probe pod has been scheduled and become Ready. The processes are in
// e.procs, for Stop, even on error.
func (e *Env) startWorkloads(ctx context.Context, opts Options, assets, certDir string) error {
	e.logDir = opts.LogDir
	if e.logDir == "" {
		e.logDir = filepath.Join(e.dir, "logs")
	}
	if err := os.MkdirAll(e.logDir, 0o700); err != nil {
		return fmt.Errorf("creating the log directory of the workloads mode: %w", err)
	}
	dir := filepath.Join(e.dir, "workloads")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("creating the workloads directory: %w", err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, e.cfg.CAData, 0o600); err != nil {
		return fmt.Errorf("writing the API server CA: %w", err)
	}
	schedConfig := filepath.Join(dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedConfig, fmt.Appendf(nil, schedulerConfig, e.kubeconfig), 0o600); err != nil {
		return fmt.Errorf("writing the kube-scheduler configuration: %w", err)
	}
	stages := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return fmt.Errorf("writing the KWOK stages: %w", err)
	}
	// KWOK also reads ~/.kwok/kwok.yaml: a home of its own keeps the
	// developer's out.
	kwokHome := filepath.Join(dir, "kwok-home")
	if err := os.Mkdir(kwokHome, 0o700); err != nil {
		return fmt.Errorf("creating KWOK's home directory: %w", err)
	}

	// No component serves anything (--secure-port=0, no KWOK server) and
	// none elects a leader, so they need no port and survive an API server
	// restart: they retry until it is back.
	starts := []struct {
		name string
		args []string
		env  []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + e.kubeconfig,
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=false",
			"--secure-port=0",
			"--bind-address=127.0.0.1",
			"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
			"--root-ca-file=" + caFile,
			"--kube-api-qps=500",
			"--kube-api-burst=1000",
		}, os.Environ()},
		{"kube-scheduler", []string{
			"--config=" + schedConfig,
			"--secure-port=0",
			"--bind-address=127.0.0.1",
		}, os.Environ()},
		{"kwok", []string{
			"--kubeconfig=" + e.kubeconfig,
			"--config=" + stages,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KWOKNodeAnnotation + "=fake",
			"--cidr=10.244.0.1/16",
		}, append(os.Environ(), "HOME="+kwokHome)},
	}
	for _, s := range starts {
		p, err := startProcess(assets, e.logDir, s.name, s.args, s.env, opts.Output)
		if err != nil {
			return err
		}
		e.procs = append(e.procs, p)
	}
	if err := e.createFakeNodes(ctx); err != nil {
		return err
	}
	return e.waitWorkloads(ctx)
}

// checkWorkloadAssets fails unless dir holds every binary of the workloads
// mode, naming the missing ones.
func checkWorkloadAssets(dir string) error {
	var missing []string
	for _, bin := range workloadBinaries {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the workloads mode needs %s, missing from the control plane binaries in %s: scripts/testenv builds them; use the directory it prints (KUBEBUILDER_ASSETS)",
			strings.Join(missing, ", "), dir)
	}
	return nil
}

// stopWorkloads stops the components, the last started first.
func (e *Env) stopWorkloads() error {
	var errs []error
	for i := len(e.procs) - 1; i >= 0; i-- {
		if err := e.procs[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	e.procs = nil
	return errors.Join(errs...)
}

// Nodes returns the names of the fake Nodes of the workloads mode, nil
// without it.
func (e *Env) Nodes() []string { return append([]string(nil), e.nodes...) }
