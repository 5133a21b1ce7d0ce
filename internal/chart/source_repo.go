package chart

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/httpclient"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// repoSource is a Helm chart repository served over HTTP(S).
type repoSource struct {
	base   *url.URL
	client *http.Client
	opts   SourceOptions

	mu    sync.Mutex
	index *repo.IndexFile // nil until fetched
}

func newRepoSource(ref string, opts SourceOptions) (*repoSource, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("chart source: %w", err))
	}
	if u.Host == "" {
		return nil, outcome.BadInput(fmt.Errorf("chart source %q: no host in the URL", u.Redacted()))
	}
	client, err := httpClient(opts)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("chart source %q: %w", u.Redacted(), err))
	}
	return &repoSource{base: u, client: client, opts: opts}, nil
}

// httpClient returns opts.HTTPClient after checking it verifies TLS, or the
// default client: DefaultHTTPTimeout, TLS verified against the system roots
// plus opts.CAFile, no redirect from https to http.
func httpClient(opts SourceOptions) (*http.Client, error) {
	if opts.HTTPClient != nil {
		if opts.CAFile != "" {
			return nil, errors.New("a CA file cannot be combined with an HTTP client of one's own")
		}
		if !httpclient.Verifies(opts.HTTPClient) {
			return nil, errors.New("the HTTP client skips TLS verification, which chart-upgrader never does")
		}
		return opts.HTTPClient, nil
	}
	return httpclient.New(httpclient.Options{CAFile: opts.CAFile, Timeout: DefaultHTTPTimeout})
}

func (s *repoSource) String() string { return s.base.Redacted() }

func (s *repoSource) Versions(ctx context.Context, name string) ([]string, error) {
	idx, err := s.fetchIndex(ctx)
	if err != nil {
		return nil, err
	}
	entries, ok := idx.Entries[name]
	if !ok || len(entries) == 0 {
		return nil, s.noName(idx, name)
	}
	versions := make([]string, 0, len(entries))
	for _, e := range entries {
		versions = append(versions, e.Version)
	}
	return sortVersions(versions), nil
}

func (s *repoSource) Load(ctx context.Context, name, version string) (*chart.Chart, error) {
	idx, err := s.fetchIndex(ctx)
	if err != nil {
		return nil, err
	}
	entries, ok := idx.Entries[name]
	if !ok || len(entries) == 0 {
		return nil, s.noName(idx, name)
	}
	var entry *repo.ChartVersion
	for _, e := range entries {
		if e.Version == version {
			entry = e
			break
		}
		if entry == nil && sameVersion(version, e.Version) {
			entry = e
		}
	}
	if entry == nil {
		versions, _ := s.Versions(ctx, name)
		return nil, notFoundVersion(s, name, version, versions)
	}
	if len(entry.URLs) == 0 {
		return nil, outcome.BadInput(fmt.Errorf("chart %s version %s in %s: the index gives no URL", name, entry.Version, s))
	}
	ref, err := repo.ResolveReferenceURL(s.base.String(), entry.URLs[0])
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("chart %s version %s in %s: %w", name, entry.Version, s, err))
	}
	u, err := url.Parse(ref)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("chart %s version %s in %s: %w", name, entry.Version, s, err))
	}
	data, err := s.get(ctx, u, s.opts.MaxArchiveBytes)
	if err != nil {
		return nil, err
	}
	if err := checkDigest(data, entry.Digest); err != nil {
		return nil, fmt.Errorf("chart archive %s: %w", u.Redacted(), err)
	}
	c, err := loadArchive(bytes.NewReader(data), limits{archive: s.opts.MaxArchiveBytes, content: MaxChartBytes})
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("loading chart %s: %w", u.Redacted(), err))
	}
	if err := checkLoaded(c, u.Redacted(), name, entry.Version); err != nil {
		return nil, err
	}
	return c, nil
}

// checkDigest compares data with the sha256 digest of an index entry; an
// empty digest checks nothing.
func checkDigest(data []byte, digest string) error {
	want := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(digest), "sha256:"))
	if want == "" {
		return nil
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("sha256 digest %s does not match %s from the index", got, want)
	}
	return nil
}

func (s *repoSource) noName(idx *repo.IndexFile, name string) error {
	names := make([]string, 0, len(idx.Entries))
	for n := range idx.Entries {
		names = append(names, n)
	}
	return notFoundName(s, name, names)
}

// fetchIndex gets index.yaml on first use. A failed fetch is not kept, so a
// later call tries again.
func (s *repoSource) fetchIndex(ctx context.Context) (*repo.IndexFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index != nil {
		return s.index, nil
	}
	u := s.base.JoinPath("index.yaml")
	data, err := s.get(ctx, u, s.opts.MaxIndexBytes)
	if err != nil {
		return nil, err
	}
	idx, err := parseIndex(data, u.Redacted())
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("reading repository index %s: %w", u.Redacted(), err))
	}
	s.index = idx
	return idx, nil
}

// get fetches u, refusing a body larger than max. A status below 500 other
// than 200 (a 4xx, a redirect without a Location), a body larger than max
// and a TLS certificate that does not verify are marked outcome.BadInput:
// asking again will not help.
func (s *repoSource) get(ctx context.Context, u *url.URL, max int64) ([]byte, error) {
	name := u.Redacted()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("fetching %s: %w", name, err))
	}
	req.Header.Set("User-Agent", httpclient.UserAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		if httpclient.Untrusted(err) {
			// Asking again will not help; TLS verification is never skipped.
			return nil, outcome.BadInput(fmt.Errorf("fetching %s: TLS certificate not trusted (a CA file can add its authority): %w", name, httpclient.Scrub(err)))
		}
		return nil, fmt.Errorf("fetching %s: %w", name, httpclient.Scrub(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("fetching %s: HTTP %s", name, resp.Status)
		if resp.StatusCode < 500 {
			// a 4xx, or a redirect without a Location: asking again will not help
			return nil, outcome.BadInput(err)
		}
		return nil, err
	}
	data, err := httpclient.ReadAll(resp, max)
	if errors.Is(err, httpclient.ErrTooLarge) {
		// Too large is bad input: the same answer will be too large again.
		return nil, outcome.BadInput(fmt.Errorf("fetching %s: the response is larger than the limit of %s: %w", name, formatBytes(max), errTooLarge))
	}
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", name, err)
	}
	return data, nil
}

// parseIndex reads a repository index with the rules of Helm's loader:
// JSON or strict YAML, invalid entries skipped, versions sorted highest
// first, apiVersion required.
func parseIndex(data []byte, source string) (*repo.IndexFile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, repo.ErrEmptyIndexYaml
	}
	idx := &repo.IndexFile{}
	var err error
	if json.Valid(data) {
		err = json.Unmarshal(data, idx)
	} else {
		err = yaml.UnmarshalStrict(data, idx)
	}
	if err != nil {
		return nil, err
	}
	if idx.APIVersion == "" {
		return nil, repo.ErrNoAPIVersion
	}
	for name, cvs := range idx.Entries {
		kept := cvs[:0]
		for _, cv := range cvs {
			if cv == nil {
				slog.Warn("skipping an empty index entry", "chart", name, "index", source)
				continue
			}
			if cv.Metadata == nil {
				cv.Metadata = &chart.Metadata{}
			}
			if cv.APIVersion == "" {
				cv.APIVersion = chart.APIVersionV1
			}
			if err := cv.Validate(); err != nil && !skippable(err) {
				slog.Warn("skipping an invalid index entry", "chart", name, "version", cv.Version, "index", source, "error", err)
				continue
			}
			kept = append(kept, cv)
		}
		idx.Entries[name] = kept
	}
	idx.SortEntries()
	return idx, nil
}

// skippable is the validation error Helm lets through in an index: some
// repositories strip aliases, making dependency names repeat.
func skippable(err error) bool {
	var verr chart.ValidationError
	return errors.As(err, &verr) && strings.HasPrefix(verr.Error(), "validation: more than one dependency with name or alias")
}
