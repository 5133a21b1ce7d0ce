// Command helmupgrade is `helm upgrade --reset-then-reuse-values --wait`
// run through the Helm SDK, the way `make bench-upgrade` measures it beside
// chart-upgrader on a release: helmupgrade KUBECONFIG NAMESPACE RELEASE
// CHART_DIR VALUES_FILE. Its requests carry the user agent
// "helm-sdk-bench".
package main

import (
	"fmt"
	"os"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "helmupgrade: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("usage: helmupgrade KUBECONFIG NAMESPACE RELEASE CHART_DIR VALUES_FILE")
	}
	kubeconfig, ns, name, chartDir, valuesFile := args[0], args[1], args[2], args[3], args[4]
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "helm-sdk-bench"
	ac := &action.Configuration{}
	if err := ac.Init(cluster.NewHelmGetter(cfg).For(ns), ns, "secret", func(string, ...any) {}); err != nil {
		return err
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		return err
	}
	vals, err := chartutil.ReadValuesFile(valuesFile)
	if err != nil {
		return err
	}
	up := action.NewUpgrade(ac)
	up.Namespace, up.ResetThenReuseValues, up.Wait, up.Timeout, up.MaxHistory = ns, true, true, 10*time.Minute, 10
	if _, err := up.Run(name, ch, vals); err != nil {
		return err
	}
	fmt.Printf("upgraded %s/%s to %s\n", ns, name, ch.Metadata.Version)
	return nil
}
