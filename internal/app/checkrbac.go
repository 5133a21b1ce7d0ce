package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
)

// CheckRBAC renders the chart at chartPath with the user values of
// valuesPath ("": none) as release ("NAMESPACE/NAME") and returns the
// read-only RBAC the conflict check of opts.ServiceAccount needs for its
// objects (suc.CheckRBAC). With kubeconfig, the scope and resource of a
// kind the chart does not define come from that cluster's discovery (it
// reads nothing else); without, it reads no cluster. Bad flags are bad
// input.
func CheckRBAC(ctx context.Context, chartPath, valuesPath, release, kubeconfig string, opts suc.CheckRBACOptions) ([]byte, error) {
	ns, name, ok := strings.Cut(release, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, outcome.BadInput(fmt.Errorf("--check-release %q: want NAMESPACE/NAME, the release's namespace and name", release))
	}
	if chartPath == "" {
		return nil, outcome.BadInput(errors.New("--check-release needs --check-chart, the chart whose objects to grant reads of"))
	}
	c, err := chart.Load(chartPath)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("--check-chart: %w", err))
	}
	vals := map[string]any{}
	if valuesPath != "" {
		if vals, err = readValues("--check-values", valuesPath); err != nil {
			return nil, err
		}
	}
	rendered, err := chart.Manifest(c, vals, name, ns)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("--check-chart %s: rendering as release %s: %w", chartPath, release, err))
	}
	objs, err := manifest.Objects(rendered)
	if err != nil {
		return nil, fmt.Errorf("--check-chart %s: %w", chartPath, err)
	}
	opts.ReleaseNamespace = ns
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return nil, outcome.BadInput(fmt.Errorf("--check-kubeconfig: %w", err))
		}
		clients, err := connect(ctx, kubeconfig, nil)
		if err != nil {
			return nil, fmt.Errorf("--check-kubeconfig: %w", err)
		}
		opts.Mapper = clients.Mapper
	}
	for _, crd := range c.CRDObjects() {
		defs, err := manifest.Objects(string(crd.File.Data))
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("--check-chart %s: %s: %w", chartPath, crd.Filename, err))
		}
		opts.CRDs = append(opts.CRDs, defs...)
	}
	out, err := suc.CheckRBAC(objs, opts)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("--check-chart %s: %w", chartPath, err))
	}
	return out, nil
}
