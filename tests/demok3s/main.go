// Command demok3s runs chart-upgrader's main job on the bundled example as
// a k3s HelmChart: a local control plane whose workloads run (KWOK nodes)
// with the real k3s helm-controller, whose Jobs package tests/klipperhelm
// runs as klipper-helm would; demo-app 1.0.0 installed as the HelmChart
// kube-system/demo-app with an installer's values; `chart-upgrader
// upgrade` to 2.0.0 with package/examples/spec-helmchart.yaml, a re-run
// that has nothing to do, and `chart-upgrader status`. It stops everything
// when done. `make demo-k3s` runs it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/tests/fixture"
	"github.com/chart-upgrader/chart-upgrader/tests/klipperhelm"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

const (
	namespace = "kube-system"
	name      = "demo-app"
	release   = "demo-system"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo-k3s: %v\n", err)
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

	step("starting a local control plane with workloads (kube-apiserver, etcd, controller-manager, scheduler, KWOK nodes) and the real k3s helm-controller")
	start := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{HelmController: true})
	if err != nil {
		return err
	}
	defer env.Stop()
	runner, err := klipperhelm.Start(ctx, env.Config(), klipperhelm.Options{})
	if err != nil {
		return err
	}
	defer runner.Stop()
	fmt.Printf("   ready in %s (API server %s)\n", time.Since(start).Round(time.Millisecond), env.Host())

	step("installing demo-app 1.0.0 as HelmChart kube-system/demo-app (chart in spec.chartContent) with the installer's values (package/examples/values.yaml)")
	if err := fixture.InstallHelmChart(ctx, env, namespace, name, release, 2*time.Minute); err != nil {
		return err
	}
	client := &helmchart.Client{Dynamic: env.Dynamic(), Kube: env.Kube()}
	cert, err := env.Kube().CoreV1().Secrets(release).Get(ctx, "demo-app-webhook-certs", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Println("   helm-controller's Job helm-install-demo-app deployed it; the chart generated its webhook certificate")

	step("the operator makes another StorageClass the default (demo-app-longhorn: is-default-class=false)")
	patch := `{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`
	if _, err := env.Kube().StorageV1().StorageClasses().Patch(ctx, "demo-app-longhorn", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "chart-upgrader-demo-k3s")
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
	spec := filepath.Join(ex, "spec-helmchart.yaml")

	step("chart-upgrader upgrade --spec package/examples/spec-helmchart.yaml --version 2.0.0")
	start = time.Now()
	if err := command(ctx, bin, append([]string{"upgrade", "--spec", spec, "--version", "2.0.0"}, upgradeFlags...)...); err != nil {
		return err
	}
	fmt.Printf("   took %s\n", time.Since(start).Round(time.Millisecond))

	after, err := env.Kube().CoreV1().Secrets(release).Get(ctx, "demo-app-webhook-certs", metav1.GetOptions{})
	if err != nil {
		return err
	}
	same := string(after.Data["tls.crt"]) == string(cert.Data["tls.crt"])
	cm, err := env.Kube().CoreV1().ConfigMaps(release).Get(ctx, "demo-app-config", metav1.GetOptions{})
	if err != nil {
		return err
	}
	h, err := client.Get(ctx, namespace, name)
	if err != nil {
		return err
	}
	step("the HelmChart's spec.valuesContent as written (secret-looking values redacted)")
	written, err := values.Parse([]byte(h.ValuesContent))
	if err != nil {
		return err
	}
	printValues(written, "")
	step("what helm-controller's Job deployed")
	for _, k := range []string{"chartVersion", "webhookImage", "requests", "limits", "replicaCount", "clusterPodCIDR", "clusterDNS"} {
		if v, ok := cm.Data[k]; ok {
			fmt.Printf("   %-15s %s\n", k, v)
		}
	}
	fmt.Printf("   webhook certificate unchanged: %v\n", same)

	step("again (a retried Job): nothing to do, no writes")
	if err := command(ctx, bin, append([]string{"upgrade", "--spec", spec, "--version", "2.0.0"}, upgradeFlags...)...); err != nil {
		return err
	}

	step("chart-upgrader status --target helmchart/kube-system/demo-app")
	if err := command(ctx, bin, append([]string{"status", "--target", "helmchart/kube-system/demo-app"}, cluster...)...); err != nil {
		return err
	}
	step("done: stopping the control plane")
	if !same {
		return errors.New("the webhook certificate changed")
	}
	return nil
}

// printValues prints every leaf of v as path = value, a value under a
// secret-looking key (cert, key, password, …) as <redacted>.
func printValues(v map[string]any, prefix string) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		if m, ok := v[k].(map[string]any); ok && len(m) > 0 {
			printValues(m, path)
			continue
		}
		shown := fmt.Sprint(v[k])
		if values.LooksSecret(k) || values.LooksSecret(prefix) {
			shown = "<redacted>"
		}
		fmt.Printf("   %-34s %s\n", path, shown)
	}
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
