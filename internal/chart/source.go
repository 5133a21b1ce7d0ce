package chart

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Source finds and loads the versions of charts, from a local directory or a
// Helm repository. A Source is safe for concurrent use.
type Source interface {
	// Versions returns the versions of chart name, highest first. A name the
	// source does not hold is an outcome.BadInput error listing the charts it
	// does hold.
	Versions(ctx context.Context, name string) ([]string, error)
	// Load returns chart name at version. "v1.2.0" finds "1.2.0" and the
	// reverse. A version the source does not hold is an outcome.BadInput
	// error listing the versions it does hold.
	Load(ctx context.Context, name, version string) (*chart.Chart, error)
	// String names the source for messages (a URL without credentials).
	String() string
}

// Defaults of SourceOptions.
const (
	// DefaultMaxIndexBytes bounds the index.yaml of a repository (32 MiB).
	DefaultMaxIndexBytes int64 = 32 << 20
	// DefaultHTTPTimeout bounds each request of the default HTTP client.
	DefaultHTTPTimeout = 2 * time.Minute
)

// SourceOptions configures NewSource. The zero value is ready to use.
type SourceOptions struct {
	// HTTPClient makes the requests of a repository source. Nil means a
	// client with DefaultHTTPTimeout, the proxy from the environment, TLS
	// verified against the system roots plus CAFile, and no redirect from
	// https to http. A client whose transport skips TLS verification is
	// refused.
	HTTPClient *http.Client
	// CAFile names a PEM file of extra certificate authorities the default
	// client trusts. It cannot be combined with HTTPClient.
	CAFile string
	// MaxIndexBytes bounds the size of index.yaml; 0 means
	// DefaultMaxIndexBytes.
	MaxIndexBytes int64
	// MaxArchiveBytes bounds the compressed size of one chart archive; 0
	// means MaxArchiveBytes. The decompressed size is bounded by
	// MaxChartBytes.
	MaxArchiveBytes int64
}

// NewSource returns the source at ref: an http:// or https:// Helm
// repository URL, an oci:// registry path (charts as Helm pushes them), or
// a local path — a directory of chart directories and
// .tgz archives, or a single chart directory or archive. Charts are matched
// on the name and version of their Chart.yaml (a repository: of its index),
// never on file names. Nothing is read until the first call; a local path
// must exist. Errors in ref or opts are marked outcome.BadInput.
func NewSource(ref string, opts SourceOptions) (Source, error) {
	if ref == "" {
		return nil, outcome.BadInput(errors.New("chart source: empty reference"))
	}
	if opts.MaxIndexBytes < 0 || opts.MaxArchiveBytes < 0 {
		return nil, outcome.BadInput(fmt.Errorf("chart source %q: size limits cannot be negative", ref))
	}
	if opts.MaxIndexBytes == 0 {
		opts.MaxIndexBytes = DefaultMaxIndexBytes
	}
	if opts.MaxArchiveBytes == 0 {
		opts.MaxArchiveBytes = MaxArchiveBytes
	}
	if scheme, _, ok := strings.Cut(ref, "://"); ok {
		switch strings.ToLower(scheme) {
		case "http", "https":
			return newRepoSource(ref, opts)
		case "oci":
			return newOCISource(ref, opts)
		default:
			return nil, outcome.BadInput(fmt.Errorf("chart source %q: unsupported scheme %q (want a directory, an http(s) repository URL or an oci:// registry)", ref, scheme))
		}
	}
	if _, err := os.Stat(ref); err != nil {
		return nil, outcome.BadInput(fmt.Errorf("chart source: %w", err))
	}
	return &dirSource{root: ref, lim: limits{archive: opts.MaxArchiveBytes, content: MaxChartBytes}}, nil
}

// Latest returns the highest version of chart name in src that satisfies
// constraint (Masterminds semver syntax; "" means any). Prereleases count
// only when devel is true. No such version is an outcome.BadInput error
// listing the versions there are.
func Latest(ctx context.Context, src Source, name, constraint string, devel bool) (string, error) {
	text := constraint
	if strings.TrimSpace(text) == "" {
		text = "*"
	}
	cons, err := semver.NewConstraint(text)
	if err != nil {
		return "", outcome.BadInput(fmt.Errorf("version constraint %q: %w", constraint, err))
	}
	cons.IncludePrerelease = devel
	versions, err := src.Versions(ctx, name)
	if err != nil {
		return "", err
	}
	var best *semver.Version
	for _, s := range versions {
		v, err := semver.NewVersion(s)
		if err != nil || (v.Prerelease() != "" && !devel) || !cons.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best = v
		}
	}
	if best == nil {
		what := "versions"
		if devel {
			what = "versions, prereleases included,"
		}
		return "", outcome.BadInput(fmt.Errorf("no %s of chart %s in %s satisfy %q; available: %s", what, name, src, constraint, list(versions)))
	}
	return best.Original(), nil
}

// sortVersions sorts versions highest first, dropping duplicates; versions
// that are not semver go last, in string order.
func sortVersions(versions []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(versions))
	for _, v := range versions {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, errA := semver.NewVersion(out[i])
		b, errB := semver.NewVersion(out[j])
		switch {
		case errA != nil && errB != nil:
			return out[i] < out[j]
		case errA != nil || errB != nil:
			return errB != nil
		case !a.Equal(b):
			return a.GreaterThan(b)
		default:
			return out[i] < out[j]
		}
	})
	return out
}

// sameVersion tells whether have is the version asked for as want: equal
// strings, or equal semver ("v1.2.0" and "1.2.0").
func sameVersion(want, have string) bool {
	if want == have {
		return true
	}
	a, errA := semver.NewVersion(want)
	b, errB := semver.NewVersion(have)
	return errA == nil && errB == nil && a.Equal(b) && a.Metadata() == b.Metadata()
}

// maxListed is how many names or versions an error lists.
const maxListed = 10

// list writes items for an error message, at most maxListed of them.
func list(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (and %d more)", strings.Join(items[:maxListed], ", "), len(items)-maxListed)
}

func notFoundName(src Source, name string, names []string) error {
	sort.Strings(names)
	return outcome.BadInput(fmt.Errorf("chart %q not found in %s; charts there: %s", name, src, list(names)))
}

func notFoundVersion(src Source, name, version string, versions []string) error {
	return outcome.BadInput(fmt.Errorf("chart %s version %q not found in %s; available: %s", name, version, src, list(versions)))
}

// checkLoaded makes sure a loaded chart is the one asked for.
func checkLoaded(c *chart.Chart, from, name, version string) error {
	if c.Metadata.Name != name || !sameVersion(version, c.Metadata.Version) {
		return outcome.BadInput(fmt.Errorf("%s holds chart %s, not %s-%s", from, nameVersion(c), name, version))
	}
	return nil
}
