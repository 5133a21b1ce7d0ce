// Command demo runs chart-upgrader's main job on the bundled example:
// a local control plane (kube-apiserver + etcd) and the Fleet simulator,
// demo-app 1.0.0 installed as a ManagedChart with an installer's values,
// then `chart-upgrader upgrade` to 2.0.0 with package/examples/spec.yaml,
// (its images on a registry on loopback, through a registries.yaml
// mirror), a re-run that has nothing to do, and `chart-upgrader status`. It stops
// everything when done. `make demo` runs it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

const (
	namespace = "fleet-local"
	name      = "demo-app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin", "chart-upgrader")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s missing: run make build", bin)
	}
	ex := filepath.Join(root, "package", "examples")

	step("starting a local control plane (kube-apiserver + etcd) and the Fleet simulator")
	start := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	sim, stopSim, err := fleetsim.Start(ctx, fleetsim.Options{Config: env.Config(), Loader: fleetsim.DirLoader(filepath.Join(ex, "charts"))})
	if err != nil {
		return err
	}
	defer stopSim()
	fmt.Printf("   ready in %s (API server %s)\n", time.Since(start).Round(time.Millisecond), env.Host())

	step("installing demo-app 1.0.0 as ManagedChart fleet-local/demo-app with the installer's values (package/examples/values.yaml)")
	data, err := os.ReadFile(filepath.Join(ex, "values.yaml"))
	if err != nil {
		return err
	}
	user, err := values.Parse(data)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := env.Kube().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	mc := fixture.ManagedChart(fixture.Install{Namespace: namespace, Name: name, Version: "1.0.0",
		ReleaseNamespace: "demo-system", Values: user})
	if _, err := env.Dynamic().Resource(managedchart.ManagedChartGVR).Namespace(namespace).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the ManagedChart: %w", err)
	}
	if _, err := fixture.WaitReady(ctx, env, namespace, name, upgrade.Want{Version: "1.0.0"}, 2*time.Minute); err != nil {
		return err
	}
	cert, err := env.Kube().CoreV1().Secrets("demo-system").Get(ctx, "demo-app-webhook-certs", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Println("   deployed; the chart generated its webhook certificate (Secret demo-system/demo-app-webhook-certs)")

	step("the operator makes another StorageClass the default (demo-app-longhorn: is-default-class=false)")
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	if _, err := env.Kube().StorageV1().StorageClasses().Patch(ctx, "demo-app-longhorn", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	sim.SetFault(namespace, name, fleetsim.Fault{Delay: 3 * time.Second})
	fmt.Println("   (the simulated Fleet agent takes 3 s to report a new deployment ready)")

	dir, err := os.MkdirTemp("", "chart-upgrader-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	step("a registry on loopback holds 2.0.0's images; the nodes' registries.yaml mirrors registry.example.com to it")
	registriesYAML, stopRegistry, err := ociregistry.Mirror(ctx, dir, "registry.example.com", "demo/app:v2.0.0", "demo/webhook:v0.5.6")
	if err != nil {
		return err
	}
	defer stopRegistry()
	cluster := []string{"--kubeconfig", env.KubeconfigPath(), "--state-dir", filepath.Join(dir, "state"),
		"--lock-file", filepath.Join(dir, "upgrade.lock"), "--termination-log", filepath.Join(dir, "termination-log"),
		"--log-format", "text"}
	upgradeFlags := append([]string{"--registries-config", registriesYAML}, cluster...)

	step("chart-upgrader upgrade --spec package/examples/spec.yaml --version 2.0.0")
	start = time.Now()
	if err := command(ctx, bin, append([]string{"upgrade", "--spec", filepath.Join(ex, "spec.yaml"), "--version", "2.0.0"}, upgradeFlags...)...); err != nil {
		return err
	}
	fmt.Printf("   took %s\n", time.Since(start).Round(time.Millisecond))

	after, err := env.Kube().CoreV1().Secrets("demo-system").Get(ctx, "demo-app-webhook-certs", metav1.GetOptions{})
	if err != nil {
		return err
	}
	same := string(after.Data["tls.crt"]) == string(cert.Data["tls.crt"])
	cm, err := env.Kube().CoreV1().ConfigMaps("demo-system").Get(ctx, "demo-app-config", metav1.GetOptions{})
	if err != nil {
		return err
	}
	step("what Helm deployed")
	for _, k := range []string{"chartVersion", "webhookImage", "requests", "limits", "replicaCount", "clusterPodCIDR", "clusterDNS"} {
		if v, ok := cm.Data[k]; ok {
			fmt.Printf("   %-15s %s\n", k, v)
		}
	}
	fmt.Printf("   webhook certificate unchanged: %v\n", same)

	step("again (a retried Job): nothing to do, no writes")
	if err := command(ctx, bin, append([]string{"upgrade", "--spec", filepath.Join(ex, "spec.yaml"), "--version", "2.0.0"}, upgradeFlags...)...); err != nil {
		return err
	}

	step("chart-upgrader status --target managedchart/fleet-local/demo-app")
	if err := command(ctx, bin, append([]string{"status", "--target", "managedchart/fleet-local/demo-app"}, cluster...)...); err != nil {
		return err
	}
	step("done: stopping the control plane")
	if !same {
		return errors.New("the webhook certificate changed")
	}
	return nil
}

func step(s string) { fmt.Printf("\n== %s\n", s) }

func command(ctx context.Context, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chart-upgrader %s: %w", args[0], err)
	}
	return nil
}
