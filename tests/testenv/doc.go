// Package testenv runs a real Kubernetes control plane (etcd and
// kube-apiserver, through controller-runtime's envtest) for the end-to-end
// tests, the demo program and the benchmarks.
//
// Start launches both processes, installs the CRDs of package
// tests/crds (ManagedChart, Bundle, BundleDeployment, Plan) and returns an
// Env: a *rest.Config with a high client rate limit, a kubeconfig file for
// subprocesses and Helm, per-test namespaces, an optional audit log, and a
// way to restart kube-apiserver alone (etcd keeps the data; the server comes
// back on the same address with the same certificates, so existing clients
// reconnect by themselves).
//
// The binaries are found in $KUBEBUILDER_ASSETS, else by running
// scripts/testenv of the repository (which builds them once from the Go
// module proxy). The core API takes a context and returns errors; Main,
// Shared and NewNamespace add the glue for a test package that shares one
// control plane across its tests (starting one costs about three seconds).
package testenv
