package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// HelmChartGVR is k3s's HelmChart, whose CRD helm-controller installs.
var HelmChartGVR = schema.GroupVersionResource{Group: "helm.cattle.io", Version: "v1", Resource: "helmcharts"}

// HelmControllerLease is the Lease the running helm-controller holds in
// kube-system ("<controller name>-lock").
const HelmControllerLease = "helm-controller-lock"

// startHelmController runs the real helm-controller (v0.17.9, built by
// scripts/testenv) against the API server, as k3s runs it embedded: one
// controller for every namespace, electing itself leader in kube-system,
// with its default job image and ClusterRole. It installs its CRDs
// itself. Start returns once it serves HelmCharts: it holds its Lease and
// the HelmChart resource is served.
func (e *Env) startHelmController(ctx context.Context, opts Options, assets string) error {
	if _, err := os.Stat(filepath.Join(assets, "helm-controller")); err != nil {
		return fmt.Errorf("the helm-controller mode needs helm-controller in %s: scripts/testenv builds it; use the directory it prints (KUBEBUILDER_ASSETS): %w", assets, err)
	}
	p, err := startProcess(assets, e.logDir, "helm-controller", []string{"--kubeconfig", e.kubeconfig},
		append(os.Environ(), "HOME="+e.dir), opts.Output)
	if err != nil {
		return err
	}
	e.procs = append(e.procs, p)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		l, err := e.kube.CoordinationV1().Leases("kube-system").Get(ctx, HelmControllerLease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "")) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		_, err = e.dynamic.Resource(HelmChartGVR).Namespace("kube-system").List(ctx, metav1.ListOptions{Limit: 1})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}
