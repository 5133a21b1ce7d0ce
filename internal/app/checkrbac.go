package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/imagecheck"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
)

// CheckRBACInput is what `plan --check-*` grants reads of.
type CheckRBACInput struct {
	Chart, Values string // the chart (directory or .tgz) and user values file ("": none)
	Release       string // NAMESPACE/NAME the chart is rendered as
	Kubeconfig    string // a cluster whose discovery scopes kinds ("": none)
	Spec          string // an upgrade spec whose own reads are added ("": none)
}

// CheckRBAC renders the chart of in with its user values as its release
// and returns the read-only RBAC the conflict check of opts.ServiceAccount
// needs for its objects (suc.CheckRBAC), with the reads in.Spec makes of
// its own (its live and once rules' sources, its health gates' objects). With a kubeconfig, the scope and resource of a kind the
// chart does not define come from that cluster's discovery (it reads
// nothing else); without, it reads no cluster. Bad flags are bad input.
func CheckRBAC(ctx context.Context, in CheckRBACInput, opts suc.CheckRBACOptions) ([]byte, error) {
	ns, name, ok := strings.Cut(in.Release, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, outcome.BadInput(fmt.Errorf("--check-release %q: want NAMESPACE/NAME, the release's namespace and name", in.Release))
	}
	if in.Chart == "" && in.Spec == "" {
		return nil, outcome.BadInput(errors.New("--check-release needs --check-chart, the chart whose objects to grant reads of, or --check-spec"))
	}
	opts.ReleaseNamespace = ns
	if in.Kubeconfig != "" {
		if _, err := os.Stat(in.Kubeconfig); err != nil {
			return nil, outcome.BadInput(fmt.Errorf("--check-kubeconfig: %w", err))
		}
		clients, err := connect(ctx, in.Kubeconfig, nil)
		if err != nil {
			return nil, fmt.Errorf("--check-kubeconfig: %w", err)
		}
		opts.Mapper = clients.Mapper
	}
	var objs []*unstructured.Unstructured
	if in.Chart != "" {
		var err error
		var pulls []suc.PullRead
		if objs, pulls, opts.CRDs, err = renderForRBAC(in, name, ns); err != nil {
			return nil, err
		}
		opts.Pulls = suc.PullReads(pulls)
	}
	if in.Spec != "" {
		sp, err := spec.LoadSpec(in.Spec, targets.Kinds())
		if err != nil {
			return nil, fmt.Errorf("--check-spec: %w", err)
		}
		opts.Spec = suc.SpecReads{}
		for _, c := range sp.Charts {
			opts.Spec.GateReads(c.Wait.Health, objs, ns, suc.Scope(opts.CRDs, opts.Mapper))
			opts.Spec.RuleReads(c.Rules, suc.Scope(opts.CRDs, opts.Mapper))
		}
		if len(opts.Spec) == 0 && in.Chart == "" {
			return nil, outcome.BadInput(fmt.Errorf("--check-spec %s: the spec makes no reads of its own (no live or once rule, no health gate) and no --check-chart is given", in.Spec))
		}
	}
	out, err := suc.CheckRBAC(objs, opts)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("--check-chart %s: %w", in.Chart, err))
	}
	return out, nil
}

// renderForRBAC renders in's chart as release name in ns: its objects,
// what the image check reads to pull as its pods (hooks included), and
// the CRDs of its crds/ folders.
func renderForRBAC(in CheckRBACInput, name, ns string) (objs []*unstructured.Unstructured, pulls []suc.PullRead, crds []*unstructured.Unstructured, err error) {
	c, err := chart.Load(in.Chart)
	if err != nil {
		return nil, nil, nil, outcome.BadInput(fmt.Errorf("--check-chart: %w", err))
	}
	vals := map[string]any{}
	if in.Values != "" {
		if vals, err = readValues("--check-values", in.Values); err != nil {
			return nil, nil, nil, err
		}
	}
	rendered, err := chart.Manifest(c, vals, name, ns)
	if err != nil {
		return nil, nil, nil, outcome.BadInput(fmt.Errorf("--check-chart %s: rendering as release %s: %w", in.Chart, in.Release, err))
	}
	if objs, err = manifest.Objects(rendered); err != nil {
		return nil, nil, nil, fmt.Errorf("--check-chart %s: %w", in.Chart, err)
	}
	withHooks, err := chart.Renderer{}.WithHooks(c, vals, name, ns)
	if err != nil {
		return nil, nil, nil, outcome.BadInput(fmt.Errorf("--check-chart %s: rendering as release %s: %w", in.Chart, in.Release, err))
	}
	all, err := manifest.Objects(withHooks)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--check-chart %s: %w", in.Chart, err)
	}
	pulls = imagecheck.PullReads(all, ns)
	for _, crd := range c.CRDObjects() {
		defs, err := manifest.Objects(string(crd.File.Data))
		if err != nil {
			return nil, nil, nil, outcome.BadInput(fmt.Errorf("--check-chart %s: %s: %w", in.Chart, crd.Filename, err))
		}
		crds = append(crds, defs...)
	}
	return objs, pulls, crds, nil
}
