package phase

import (
	"context"
	"errors"
	"io"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// MergeTarget runs the merge of `merge --target` in cluster mode: U from
// the ManagedChart, the old defaults from the chart source at the deployed
// version, live objects from the cluster, --set and -f after the rules. It
// reads only: no lock, no journal, no write.
func MergeTarget(ctx context.Context, opts Options) (*values.Result, error) {
	opts.defaults()
	opts.Out = io.Discard // the caller prints the result
	if opts.SpecFile != "" {
		return nil, outcome.BadInput(errors.New("merge takes --target (with --chart-source), not --spec"))
	}
	charts, _, err := planCharts(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := RESTConfig(opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if opts.WrapTransport != nil {
		cfg.Wrap(opts.WrapTransport)
	}
	env, err := NewEnv(cfg, opts.Log)
	if err != nil {
		return nil, err
	}
	sess := &session{env: env}
	s, err := sess.state(&opts, charts[0])
	if err != nil {
		return nil, err
	}
	if err := (resolvePhase{}).Run(ctx, s); err != nil {
		return nil, err
	}
	err = computeMerge(ctx, s)
	return s.Merge, err
}
