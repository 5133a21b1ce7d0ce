package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/tests/k3scases"
)

func asK3sTLS(t *tlsSpec) *k3scases.TLS {
	if t == nil {
		return nil
	}
	return &k3scases.TLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.InsecureSkipVerify}
}

// asK3s is a directory in the cases' shape.
func asK3s(d hostsDir) k3scases.Dir {
	var out k3scases.Dir
	if s := d.server; s != nil {
		if s.url != nil {
			u := s.url.String()
			out.Server = &u
		}
		out.ServerAuth, out.ServerTLS = s.config.Auth != nil, asK3sTLS(s.config.TLS)
	}
	for _, ep := range d.endpoints {
		out.Endpoints = append(out.Endpoints, k3scases.Endpoint{URL: ep.url.String(), OverridePath: ep.overridePath,
			Auth: ep.config.Auth != nil, TLS: asK3sTLS(ep.config.TLS), Rewrites: ep.rewrites})
	}
	return out
}

// The test kubelet's hosts.toml are k3s's own, case by case of k3s's
// test (package k3scases).
func TestHostsAreK3sOwn(t *testing.T) {
	cases, err := k3scases.Load()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 30, "the transcribed cases")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var f registriesFile
			require.NoError(t, yaml.Unmarshal([]byte(c.Registries), &f))
			got := map[string]k3scases.Dir{}
			for dir, h := range hosts(&f, c.NoDefaultEndpoint) {
				got[dir] = asK3s(h)
			}
			assert.Equal(t, c.Want, got)
		})
	}
	t.Logf("%d cases of k3s's", len(cases))
}
