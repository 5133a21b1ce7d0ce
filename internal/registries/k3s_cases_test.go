package registries

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/k3scases"
)

func tlsWant(t *TLS) *k3scases.TLS {
	if t == nil {
		return nil
	}
	return &k3scases.TLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.InsecureSkipVerify}
}

// asK3s is a hostEntry in the cases' shape. The server of "*" (its URL
// filled per image) is "" when a mirrors."*" made it and no URL when a
// configs."*" did, as k3s keeps them.
func asK3s(h hostEntry) k3scases.Dir {
	var out k3scases.Dir
	if s := h.server; s != nil {
		if s.url != nil {
			u := s.url.String()
			out.Server = &u
		} else if !s.hasConfig() {
			empty := ""
			out.Server = &empty
		}
		out.ServerAuth, out.ServerTLS = s.auth != nil, tlsWant(s.tls)
	}
	for _, ep := range h.endpoints {
		e := k3scases.Endpoint{URL: ep.url.String(), OverridePath: ep.override, Auth: ep.auth != nil, TLS: tlsWant(ep.tls)}
		for _, rw := range ep.rewrites {
			if e.Rewrites == nil {
				e.Rewrites = map[string]string{}
			}
			e.Rewrites[rw.Pattern] = rw.Replacement
		}
		out.Endpoints = append(out.Endpoints, e)
	}
	return out
}

// The hosts.toml the package reads a registries.yaml into are k3s's own,
// case by case of k3s's test (package k3scases).
func TestHostsAreK3sOwn(t *testing.T) {
	cases, err := k3scases.Load()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 30, "the transcribed cases")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			cfg, err := Parse("registries.yaml", []byte(c.Registries))
			require.NoError(t, err)
			cfg.NoDefaultEndpoint = c.NoDefaultEndpoint
			got := map[string]k3scases.Dir{}
			for dir, h := range cfg.hosts() {
				got[dir] = asK3s(h)
			}
			assert.Equal(t, c.Want, got)
		})
	}
}
