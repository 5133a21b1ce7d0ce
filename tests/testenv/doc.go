// Package testenv runs a real Kubernetes control plane (etcd and
// kube-apiserver, through controller-runtime's envtest) for the end-to-end
// tests, the demo program and the benchmarks.
//
// Start launches both processes, installs the CRDs of package
// tests/crds (ManagedChart, Bundle, BundleDeployment, Plan, HelmChart,
// HelmChartConfig) and returns an
// Env: a *rest.Config with a high client rate limit, a kubeconfig file for
// subprocesses and Helm, per-test namespaces, an optional audit log, and a
// way to restart kube-apiserver alone (etcd keeps the data; the server comes
// back on the same address with the same certificates, so existing clients
// reconnect by themselves).
//
// # The workloads mode
//
// By default nothing but etcd and kube-apiserver runs: objects are stored
// and served, and no controller acts on them (a Deployment gets no
// ReplicaSet, a deleted namespace stays Terminating). Options.Workloads
// adds, all on loopback and with their logs in Env.LogDir:
//
//   - kube-controller-manager, real, with the workload controllers
//     (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob), garbage
//     collection, namespace deletion, service accounts and endpoints; no
//     leader election, no node lifecycle, cloud or volume controllers;
//   - kube-scheduler, real;
//   - KWOK (sigs.k8s.io/kwok) as the kubelet of FakeNodes fake Nodes that
//     the harness creates (annotated KWOKNodeAnnotation=fake, with
//     capacity). KWOK runs no container: it writes the pod status that a
//     kubelet would. A scheduled pod becomes Running and Ready at once, with
//     a pod IP; a Job's pod then Succeeded (exit code 0), so Jobs complete; a
//     pod being deleted is deleted at once (finalizers still hold it).
//
// Start returns once a probe pod has been scheduled and made Ready, so a
// Deployment created next rolls out: a ReplicaSet, scheduled pods, Ready,
// updatedReplicas and availableReplicas reached, condition Progressing with
// reason NewReplicaSetAvailable. Nothing here is faked but the nodes and
// what runs on them: probes, images, volumes, exec and logs do not exist.
//
// A test holds a pod in another state with the annotation HoldAnnotation on
// the pod (on a workload's pod template):
//
//   - HoldNotReady ("not-ready"): Running, containers started, Ready False
//     forever. A Deployment of such pods never becomes available; with
//     spec.progressDeadlineSeconds its condition Progressing turns False
//     with reason ProgressDeadlineExceeded. A Job's pod never finishes.
//   - HoldFail ("fail"): a Job's pod fails (phase Failed, exit code 1);
//     with backoffLimit 0 the Job fails with reason BackoffLimitExceeded.
//     On other pods it acts as HoldNotReady.
//
// Options.HelmController adds the real k3s helm-controller; the pods of
// its Jobs are left to package tests/klipperhelm (docs/testing.md).
//
// Changing the annotation of a template changes the template: the
// Deployment rolls out a new ReplicaSet, which is how a test makes an
// upgrade stall.
//
// # Binaries
//
// The binaries are found in $KUBEBUILDER_ASSETS, else by running
// scripts/testenv of the repository (which builds them once from the Go
// module proxy, into ~/.cache/chart-upgrader/testenv, and also builds
// kube-controller-manager, kube-scheduler, kwok and helm-controller). The
// core API takes a context and returns errors; Main, Shared, ForTest and
// Env.Namespace add the glue for a test package that shares one control
// plane across its tests (starting one costs about three seconds, the
// workloads mode a few more).
package testenv
