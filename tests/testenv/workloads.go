package testenv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// HoldAnnotation, on a Pod (for a workload: on its pod template), tells
// KWOK in the workloads mode to hold the pod in a state instead of making it
// Running and Ready. Its values are HoldNotReady and HoldFail; any other
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
)

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
// service accounts and endpoints. Not the node lifecycle controller (the
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

// createFakeNodes creates the Nodes KWOK manages. A Node may carry its
// status at creation: capacity and addresses are set here, the conditions
// by KWOK.
func (e *Env) createFakeNodes(ctx context.Context) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for i := range FakeNodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{KWOKNodeAnnotation: "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
					"type":                   "kwok",
				},
			},
			Status: corev1.NodeStatus{
				Capacity:    capacity,
				Allocatable: capacity,
				Addresses: []corev1.NodeAddress{
					{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.250.0.%d", i+1)},
					{Type: corev1.NodeHostName, Address: name},
				},
			},
		}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating fake node %s: %w", name, err)
		}
		e.nodes = append(e.nodes, name)
		// Admission (TaintNodesByCondition) gives a new Node the taint
		// node.kubernetes.io/not-ready, which the node lifecycle controller
		// would lift once the Node is Ready; that controller does not run.
		untaint := []byte(`{"spec":{"taints":null}}`)
		if _, err := e.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, untaint, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("removing the taints of fake node %s: %w", name, err)
		}
	}
	return nil
}

// workloadsTimeout bounds each step of waitWorkloads.
const workloadsTimeout = time.Minute

// waitWorkloads returns once every fake Node is Ready (KWOK runs), the
// namespace "default" has its ServiceAccount (kube-controller-manager runs)
// and a probe pod has been scheduled and become Ready (kube-scheduler runs),
// the probe deleted again. It fails at once when a component exits.
func (e *Env) waitWorkloads(ctx context.Context) error {
	core := e.kube.CoreV1()
	if err := e.pollWorkloads(ctx, "the fake nodes to become Ready (KWOK)", func(ctx context.Context) (bool, error) {
		for _, name := range e.nodes {
			node, err := core.Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	if err := e.pollWorkloads(ctx, "the default ServiceAccount (kube-controller-manager)", func(ctx context.Context) (bool, error) {
		_, err := core.ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return err
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-probe", Namespace: metav1.NamespaceSystem},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "probe", Image: "testenv.invalid/probe:1"}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := core.Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the probe pod: %w", err)
	}
	var last *corev1.Pod
	if err := e.pollWorkloads(ctx, "the probe pod to be scheduled and Ready (kube-scheduler, KWOK)", func(ctx context.Context) (bool, error) {
		pod, err := core.Pods(probe.Namespace).Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pod
		return pod.Spec.NodeName != "" && podReady(pod), nil
	}); err != nil {
		if last != nil {
			return fmt.Errorf("%w; the probe pod: node %q, phase %q, conditions %+v", err, last.Spec.NodeName, last.Status.Phase, last.Status.Conditions)
		}
		return err
	}
	if err := core.Pods(probe.Namespace).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the probe pod: %w", err)
	}
	return e.pollWorkloads(ctx, "the probe pod to be deleted (KWOK)", func(ctx context.Context) (bool, error) {
		_, err := core.Pods(probe.Namespace).Get(ctx, probe.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// pollWorkloads polls cond until it holds, a component exits or
// workloadsTimeout passes. Freshly started components offer nothing to
// watch for, hence the polling.
func (e *Env) pollWorkloads(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, workloadsTimeout, true,
		func(ctx context.Context) (bool, error) {
			for _, p := range e.procs {
				if err := p.exited(); err != nil {
					return false, err
				}
			}
			return cond(ctx)
		})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (logs in %s)", what, err, e.logDir)
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

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Nodes returns the names of the fake Nodes of the workloads mode, nil
// without it.
func (e *Env) Nodes() []string { return append([]string(nil), e.nodes...) }

// LogDir is the directory holding the logs of the workloads mode's
// components (kube-controller-manager.log, kube-scheduler.log, kwok.log),
// "" without it.
func (e *Env) LogDir() string { return e.logDir }
