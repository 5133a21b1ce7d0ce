package channel

import (
	"context"
	"errors"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/httpclient"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// ResolveRepo returns the highest version of chart chartName in the Helm
// repository at repoURL (its index.yaml) or in a local directory of charts,
// that satisfies constraint (Masterminds semver syntax; "" means any).
// Prereleases count only when devel is set. The repository is read through
// package chart, with its size limits and TLS always verified (opts.CAFile
// adds certificate authorities); network errors and 5xx answers are retried
// like Resolve's. No satisfying version, an unknown chart, a bad constraint
// or a 4xx answer is outcome.BadInput, listing what there is.
func ResolveRepo(ctx context.Context, repoURL, chartName, constraint string, devel bool, opts Options) (string, error) {
	opts = opts.withDefaults()
	if chartName == "" {
		return "", outcome.BadInput(fmt.Errorf("repository %q: no chart name given", repoURL))
	}
	src, err := chart.NewSource(repoURL, chart.SourceOptions{CAFile: opts.CAFile})
	if err != nil {
		return "", err
	}
	var version string
	// chart's errors name the chart and the source; retry's name them too.
	err = retry(ctx, opts, fmt.Sprintf("chart %s in %s", chartName, src), func(ctx context.Context) error {
		v, err := chart.Latest(ctx, src, chartName, constraint, devel)
		switch {
		case err == nil, errors.Is(err, outcome.ErrBadInput):
		case httpclient.Untrusted(err):
			return outcome.BadInput(fmt.Errorf("TLS certificate not trusted (a CA file can add its authority): %w", err))
		default:
			return retryable(err)
		}
		version = v
		return err
	})
	if err != nil {
		return "", err
	}
	return version, nil
}

// Query says what to resolve: a channel URL, or a chart in a repository.
type Query struct {
	Channel    string // SUC channel URL
	Repo       string // Helm repository URL or chart directory
	Chart      string // chart name in Repo
	Constraint string // semver constraint for Repo; "" means any
	Devel      bool   // let prereleases satisfy Constraint
}

// ResolveQuery resolves q with Resolve or ResolveRepo. Exactly one of
// q.Channel and q.Repo must be given, q.Chart with q.Repo only; otherwise it
// is outcome.BadInput.
func ResolveQuery(ctx context.Context, q Query, opts Options) (string, error) {
	switch {
	case q.Channel != "" && q.Repo != "":
		return "", outcome.BadInput(errors.New("give a channel URL or a repository, not both"))
	case q.Channel != "":
		if q.Chart != "" || q.Constraint != "" || q.Devel {
			return "", outcome.BadInput(errors.New("a chart name, constraint or devel go with a repository, not a channel URL"))
		}
		return Resolve(ctx, q.Channel, opts)
	case q.Repo != "":
		return ResolveRepo(ctx, q.Repo, q.Chart, q.Constraint, q.Devel, opts)
	default:
		return "", outcome.BadInput(errors.New("nothing to resolve: give a channel URL or a repository and a chart name"))
	}
}
