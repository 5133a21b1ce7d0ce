package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The one target of the soak: the bundled example, as `make demo` installs it.
const (
	namespace = "fleet-local"
	name      = "demo-app"
	targetRef = "managedchart/" + namespace + "/" + name
	v1        = "1.0.0"
	v2        = "2.0.0"
)

// world is one control plane, the Fleet simulator serving it, and the
// ManagedChart demo-app.
type world struct {
	env      *testenv.Env
	sim      *fleetsim.Sim
	tc       *managedchart.Client
	examples string // package/examples
	stopSim  func() // stops the simulator and waits for it

	mu       sync.Mutex // serializes API server restarts with Stop
	stopped  bool
	restarts int
	probes   int
}

// startWorld starts the control plane and the simulator and installs
// demo-app 1.0.0 with the installer's values; it returns once it is ready.
func startWorld(ctx context.Context, root string) (*world, error) {
	w := &world{examples: filepath.Join(root, "package", "examples")}
	var err error
	if w.env, err = testenv.Start(ctx, testenv.Options{}); err != nil {
		return nil, err
	}
	w.tc = &managedchart.Client{Dynamic: w.env.Dynamic(), Kube: w.env.Kube()}
	if w.sim, w.stopSim, err = fleetsim.Start(ctx, fleetsim.Options{Config: w.env.Config(), Namespace: namespace,
		Loader: fleetsim.DirLoader(filepath.Join(w.examples, "charts"))}); err != nil {
		w.stop()
		return nil, err
	}
	if err := w.install(ctx); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

// installerValues are package/examples/values.yaml: what the installer and
// the operator wrote.
func (w *world) installerValues() (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(w.examples, "values.yaml"))
	if err != nil {
		return nil, err
	}
	return values.Parse(data)
}

func (w *world) install(ctx context.Context) error {
	user, err := w.installerValues()
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := w.env.Kube().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	mc := fixture.ManagedChart(fixture.Install{Namespace: namespace, Name: name, Version: v1,
		ReleaseNamespace: "demo-system", Values: user})
	if _, err := w.env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(namespace).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the ManagedChart: %w", err)
	}
	if _, err := fixture.WaitReady(ctx, w.env, namespace, name, upgrade.Want{Version: v1}, 2*time.Minute); err != nil {
		return err
	}
	return nil
}

// stop stops the simulator and the control plane; safe to call twice.
func (w *world) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	if w.stopSim != nil { // bounded: the soak must end within its time
		stopped := make(chan struct{})
		go func() { w.stopSim(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
		}
	}
	if w.env != nil {
		_ = w.env.Stop()
	}
}

// restartAPIServer stops kube-apiserver (etcd keeps the data), leaves it
// down for down, and starts it again; it returns when it serves again.
func (w *world) restartAPIServer(ctx context.Context, down time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return errors.New("the control plane is stopped")
	}
	if err := w.env.StopAPIServer(); err != nil {
		return err
	}
	w.restarts++
	select {
	case <-time.After(down):
	case <-ctx.Done():
	}
	// always start it again, even when ctx ended: never leave it down
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return w.env.StartAPIServer(sctx)
}

// probeSim returns once the simulator's ManagedChart watch delivers events
// again after a kube-apiserver restart: client-go's reflector re-watches
// with a backoff that can reach a minute, and meanwhile the simulated
// Rancher would not see the tool's next apply. It creates a ManagedChart
// of a chart the source does not have, waits until the simulator has
// written its Defined condition, and deletes it.
func (w *world) probeSim(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w.mu.Lock()
	w.probes++
	probe := fmt.Sprintf("soak-probe-%d", w.probes)
	w.mu.Unlock()
	res := w.env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(namespace)
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "management.cattle.io/v3", "kind": "ManagedChart",
		"metadata": map[string]any{"name": probe, "namespace": namespace},
		"spec": map[string]any{"chart": "soak-probe", "version": "0.0.1", "defaultNamespace": "soak-probe",
			"targets": []any{map[string]any{"clusterName": "local"}}},
	}}
	if err := retry(ctx, func(ctx context.Context) error {
		_, err := res.Create(ctx, mc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return time.Since(start), fmt.Errorf("creating the probe %s: %w", probe, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = retry(dctx, func(ctx context.Context) error {
			err := res.Delete(ctx, probe, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}()
	err := retry(ctx, func(ctx context.Context) error {
		u, err := res.Get(ctx, probe, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Defined" {
				return nil
			}
		}
		return errors.New("the simulator has not seen the probe yet")
	})
	if err != nil {
		return time.Since(start), fmt.Errorf("the simulator did not see the probe %s: %w", probe, err)
	}
	return time.Since(start), nil
}

// retry calls f until it succeeds or ctx ends (the API server may be
// restarting); it returns f's last error.
func retry(ctx context.Context, f func(context.Context) error) error {
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// get reads the ManagedChart, retrying through an API server restart.
func (w *world) get(ctx context.Context) (*managedchart.ManagedChart, error) {
	var mc *managedchart.ManagedChart
	err := retry(ctx, func(ctx context.Context) error {
		m, found, err := w.tc.Get(ctx, namespace, name)
		if err == nil && !found {
			err = errors.New("the ManagedChart is gone")
		}
		mc = m
		return err
	})
	return mc, err
}

// look reads the ManagedChart, its Bundle and BundleDeployments once.
func (w *world) look(ctx context.Context) (*managedchart.ManagedChart, *managedchart.Bundle, []managedchart.BundleDeployment, error) {
	mc, err := w.get(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var b *managedchart.Bundle
	var bds []managedchart.BundleDeployment
	err = retry(ctx, func(ctx context.Context) error {
		var err error
		if b, err = w.tc.Bundle(ctx, mc.Namespace, mc.Name); err != nil {
			return err
		}
		bds, err = w.bundleDeployments(ctx, mc)
		return err
	})
	return mc, b, bds, err
}

// bundleDeployments reads every BundleDeployment of mc's Bundle, one by
// one: the oracle judges by them (managedchart.Evaluate), where the tool
// trusts Fleet's summary.
func (w *world) bundleDeployments(ctx context.Context, mc *managedchart.ManagedChart) ([]managedchart.BundleDeployment, error) {
	list, err := w.tc.Dynamic.Resource(managedchart.BundleDeploymentGVR).List(ctx,
		metav1.ListOptions{LabelSelector: managedchart.BundleSelector(mc.Namespace, mc.Name)})
	if err != nil {
		return nil, fmt.Errorf("listing the bundledeployments of %s: %w", managedchart.BundleName(mc.Name), err)
	}
	bds := make([]managedchart.BundleDeployment, 0, len(list.Items))
	for i := range list.Items {
		bds = append(bds, managedchart.ParseBundleDeployment(&list.Items[i]))
	}
	return bds, nil
}

// awaitState polls (every 100 ms, within timeout) until cond holds for what
// the cluster shows; it returns the last look and whether cond held.
func (w *world) awaitState(ctx context.Context, timeout time.Duration,
	cond func(*managedchart.ManagedChart, *managedchart.Bundle, []managedchart.BundleDeployment) bool) (*managedchart.ManagedChart, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *managedchart.ManagedChart
	for {
		mc, b, bds, err := w.look(ctx)
		if err == nil {
			last = mc
			if cond(mc, b, bds) {
				return mc, true
			}
		}
		select {
		case <-ctx.Done():
			return last, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// patch applies a JSON merge patch to the ManagedChart as another writer.
func (w *world) patch(ctx context.Context, patch []byte) error {
	_, err := w.env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(namespace).
		Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "soak-writer"})
	return err
}

// backups lists the backup Secrets of the target.
func (w *world) backups(ctx context.Context) ([]corev1.Secret, error) {
	var items []corev1.Secret
	err := retry(ctx, func(ctx context.Context) error {
		list, err := w.env.Kube().CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: managedchart.LabelBackupOf + "=" + name})
		if err == nil {
			items = list.Items
		}
		return err
	})
	return items, err
}

// healthy: the Bundle has observed its generation and preflight's health
// check finds nothing.
func healthy(mc *managedchart.ManagedChart, b *managedchart.Bundle, _ []managedchart.BundleDeployment) bool {
	return b != nil && b.Status.ObservedGeneration == b.Generation && managedchart.Health(mc, b).Healthy()
}
