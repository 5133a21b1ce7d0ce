package channel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/chart-upgrader/chart-upgrader/internal/httpclient"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// The headers SUC sends with a channel request.
const (
	HeaderClusterID     = "X-SUC-Cluster-ID"
	HeaderLatestVersion = "X-SUC-Latest-Version"
)

// Resolve returns the version the SUC channel at rawURL points to. It sends a
// GET without following redirects, with X-SUC-Cluster-ID and
// X-SUC-Latest-Version when opts gives them. A redirect (301, 302, 303, 307,
// 308) names the version in the last path element of its Location, resolved
// against rawURL, query and fragment ignored; a 2xx answer names it in the
// last path element of rawURL. '+' in the version becomes '-'.
//
// Network errors, 5xx answers and requests without an answer in time are
// retried (opts.Attempts, with backoff). A 4xx answer, a redirect without a
// Location, or a version that checkVersion refuses is outcome.BadInput and
// is not retried. Errors name the URL, without its credentials.
func Resolve(ctx context.Context, rawURL string, opts Options) (string, error) {
	opts = opts.withDefaults()
	u, err := parseURL(rawURL)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("channel URL %q", u.Redacted())
	client, err := httpclient.New(httpclient.Options{CAFile: opts.CAFile, Redirects: httpclient.NoFollow})
	if err != nil {
		return "", prefix(what, err)
	}
	defer client.CloseIdleConnections()
	var version string
	err = retry(ctx, opts, what, func(ctx context.Context) error {
		v, err := ask(ctx, client, u, opts)
		version = v
		if err != nil && !isTransient(err) {
			return prefix(what, err)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	return version, nil
}

// parseURL checks that rawURL is an absolute http(s) URL.
func parseURL(rawURL string) (*url.URL, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, outcome.BadInput(errors.New("channel URL: empty"))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("channel URL: %w", err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, outcome.BadInput(fmt.Errorf("channel URL %q: want an http or https URL", u.Redacted()))
	}
	if u.Host == "" {
		return nil, outcome.BadInput(fmt.Errorf("channel URL %q: no host", u.Redacted()))
	}
	return u, nil
}

// ask makes one channel request and reads the version from the answer.
func ask(ctx context.Context, client *http.Client, u *url.URL, opts Options) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", outcome.BadInput(err)
	}
	req.Header.Set("User-Agent", httpclient.UserAgent)
	if opts.ClusterID != "" {
		req.Header.Set(HeaderClusterID, opts.ClusterID)
	}
	if opts.CurrentVersion != "" {
		req.Header.Set(HeaderLatestVersion, opts.CurrentVersion)
	}
	resp, err := client.Do(req)
	if err != nil {
		if httpclient.Untrusted(err) {
			// Asking again will not help; TLS verification is never skipped.
			return "", outcome.BadInput(fmt.Errorf("TLS certificate not trusted (a CA file can add its authority): %w", httpclient.Scrub(err)))
		}
		return "", retryable(httpclient.Scrub(err))
	}
	// A small answer leaves its connection reusable; a large one closes it.
	defer httpclient.Drain(resp.Body)
	code := resp.StatusCode
	switch {
	case isRedirect(code):
		v, err := versionFromLocation(u, resp.Header.Get("Location"), opts.RequireSemver)
		if err != nil {
			return "", outcome.BadInput(fmt.Errorf("answered %s: %w", resp.Status, err))
		}
		return v, nil
	case code >= 200 && code < 300:
		v, err := versionFromPath(u.Path, opts.RequireSemver)
		if err != nil {
			return "", outcome.BadInput(fmt.Errorf("answered %s, naming the URL's last path element as the version: %w", resp.Status, err))
		}
		return v, nil
	case code >= 400 && code < 500:
		return "", outcome.BadInput(fmt.Errorf("answered %s", resp.Status))
	case code >= 500:
		return "", retryable(fmt.Errorf("answered %s", resp.Status))
	default:
		return "", fmt.Errorf("answered %s, neither a redirect nor a 2xx", resp.Status)
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// versionFromLocation returns the version a Location header value names,
// resolved against the request URL base the way net/http's
// Response.Location does.
func versionFromLocation(base *url.URL, location string, requireSemver bool) (string, error) {
	if location == "" {
		return "", errors.New("no Location header")
	}
	loc, err := base.Parse(location)
	if err != nil {
		return "", fmt.Errorf("location %q: %w", location, err)
	}
	v, err := versionFromPath(loc.Path, requireSemver)
	if err != nil {
		return "", fmt.Errorf("location %q: %w", loc.Redacted(), err)
	}
	return v, nil
}
