package channel

import (
	"log/slog"
	"time"
)

// Defaults of Options.
const (
	// DefaultTimeout bounds a whole resolution, retries included.
	DefaultTimeout = time.Minute
	// DefaultAttemptTimeout bounds one request.
	DefaultAttemptTimeout = 15 * time.Second
	// DefaultAttempts is how many requests a resolution makes at most.
	DefaultAttempts = 3
	// DefaultBackoff is the wait before the first retry; it doubles for each
	// further retry.
	DefaultBackoff = 500 * time.Millisecond
)

// Options configures Resolve and ResolveRepo. The zero value is ready to use.
type Options struct {
	// ClusterID is sent as X-SUC-Cluster-ID, as SUC does (the UID of the
	// kube-system namespace); empty sends no header.
	ClusterID string
	// CurrentVersion is sent as X-SUC-Latest-Version, the version SUC
	// resolved last time; empty sends no header.
	CurrentVersion string
	// CAFile names a PEM file of certificate authorities trusted besides the
	// system roots. TLS is always verified; there is no way to turn it off.
	CAFile string
	// RequireSemver refuses a channel version that is not semver after an
	// optional leading "v".
	RequireSemver bool
	// Timeout bounds the whole resolution (DefaultTimeout when 0); the
	// context's own deadline is honoured too.
	Timeout time.Duration
	// AttemptTimeout bounds each request (DefaultAttemptTimeout when 0).
	AttemptTimeout time.Duration
	// Attempts is the most requests made (DefaultAttempts when 0).
	Attempts int
	// Backoff is the wait before the first retry (DefaultBackoff when 0),
	// doubled for each further retry.
	Backoff time.Duration
	// Log receives a line for each failed attempt that is retried; nil
	// discards them.
	Log *slog.Logger
}

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}
