package chart

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/chart-upgrader/chart-upgrader/internal/httpclient"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// ociSource is an OCI registry holding charts as Helm pushes them
// (`helm push chart.tgz oci://host/path`): chart name under path, one tag
// per version, pulled with Helm's own registry client over the one HTTP
// client (TLS verified, the CA file trusted).
type ociSource struct {
	ref    string // host[:port]/path, without the scheme
	client *registry.Client
	opts   SourceOptions
}

func newOCISource(ref string, opts SourceOptions) (*ociSource, error) {
	rest := strings.TrimSuffix(ref[len("oci://"):], "/")
	if rest == "" || strings.HasPrefix(rest, "/") {
		return nil, outcome.BadInput(fmt.Errorf("chart source %q: no registry host", ref))
	}
	hc, err := httpClient(opts)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("chart source %q: %w", ref, err))
	}
	c, err := registry.NewClient(registry.ClientOptHTTPClient(hc), registry.ClientOptEnableCache(false),
		registry.ClientOptCredentialsFile(""))
	if err != nil {
		return nil, fmt.Errorf("chart source %q: %w", ref, err)
	}
	return &ociSource{ref: rest, client: c, opts: opts}, nil
}

func (s *ociSource) String() string { return "oci://" + s.ref }

// Versions lists the tags of chart name, highest version first.
func (s *ociSource) Versions(_ context.Context, name string) ([]string, error) {
	tags, err := s.client.Tags(s.ref + "/" + name)
	if err != nil {
		return nil, s.fail(fmt.Sprintf("listing the versions of chart %s", name), err)
	}
	// Helm writes a version's "+" as "_" in a tag
	for i := range tags {
		tags[i] = strings.ReplaceAll(tags[i], "_", "+")
	}
	return sortVersions(tags), nil
}

// Load pulls chart name at version.
func (s *ociSource) Load(ctx context.Context, name, version string) (*chart.Chart, error) {
	versions, err := s.Versions(ctx, name)
	if err != nil {
		return nil, err
	}
	tag := ""
	for _, v := range versions {
		if v == version || (tag == "" && sameVersion(version, v)) {
			tag = v
		}
	}
	if tag == "" {
		return nil, notFoundVersion(s, name, version, versions)
	}
	ref := s.ref + "/" + name + ":" + strings.ReplaceAll(tag, "+", "_")
	res, err := s.client.Pull(ref, registry.PullOptWithChart(true))
	if err != nil {
		return nil, s.fail("pulling "+ref, err)
	}
	if int64(len(res.Chart.Data)) > s.opts.MaxArchiveBytes {
		return nil, outcome.BadInput(fmt.Errorf("chart %s: the archive is larger than %d bytes", ref, s.opts.MaxArchiveBytes))
	}
	c, err := loadArchive(bytes.NewReader(res.Chart.Data), limits{archive: s.opts.MaxArchiveBytes, content: MaxChartBytes})
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("loading chart oci://%s: %w", ref, err))
	}
	if err := checkLoaded(c, "oci://"+ref, name, tag); err != nil {
		return nil, err
	}
	return c, nil
}

// fail names the registry; an untrusted certificate is bad input.
func (s *ociSource) fail(what string, err error) error {
	if httpclient.Untrusted(err) {
		return outcome.BadInput(fmt.Errorf("%s from %s: TLS certificate not trusted (a CA file can add its authority): %w", what, s, httpclient.Scrub(err)))
	}
	return fmt.Errorf("%s from %s: %w", what, s, httpclient.Scrub(err))
}
