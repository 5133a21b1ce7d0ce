package registries

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// k3sCase is one case of k3s's own getHostConfigs test, as
// testdata/k3s-host-configs.yaml transcribes it (its header says from
// where): a registries.yaml and the hosts.toml k3s writes for it, by
// directory.
type k3sCase struct {
	Name              string              `yaml:"name"`
	NoDefaultEndpoint bool                `yaml:"noDefaultEndpoint"`
	Registries        string              `yaml:"registries"`
	Want              map[string]k3sHosts `yaml:"want"`
}

type k3sHosts struct {
	Server     *string       `yaml:"server"` // nil: no URL; "": the pulled registry's own
	ServerAuth bool          `yaml:"serverAuth"`
	ServerTLS  *TLSWant      `yaml:"serverTLS"`
	Endpoints  []k3sEndpoint `yaml:"endpoints"`
}

type k3sEndpoint struct {
	URL          string            `yaml:"url"`
	OverridePath bool              `yaml:"overridePath"`
	Auth         bool              `yaml:"auth"`
	TLS          *TLSWant          `yaml:"tls"`
	Rewrites     map[string]string `yaml:"rewrites"`
}

// TLSWant is a TLS block of the cases.
type TLSWant struct {
	CAFile             string `yaml:"caFile"`
	CertFile           string `yaml:"certFile"`
	KeyFile            string `yaml:"keyFile"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify"`
}

func tlsWant(t *TLS) *TLSWant {
	if t == nil {
		return nil
	}
	return &TLSWant{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.InsecureSkipVerify}
}

// asK3s is a hostEntry in the cases' shape. The server of "*" (its URL
// filled per image) is "" when a mirrors."*" made it and no URL when a
// configs."*" did, as k3s keeps them.
func asK3s(h hostEntry) k3sHosts {
	var out k3sHosts
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
		e := k3sEndpoint{URL: ep.url.String(), OverridePath: ep.override, Auth: ep.auth != nil, TLS: tlsWant(ep.tls)}
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
// case by case of k3s's test.
func TestHostsAreK3sOwn(t *testing.T) {
	data, err := os.ReadFile("testdata/k3s-host-configs.yaml")
	require.NoError(t, err)
	var cases []k3sCase
	require.NoError(t, yaml.Unmarshal(data, &cases))
	require.GreaterOrEqual(t, len(cases), 30, "the transcribed cases")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			cfg, err := Parse("registries.yaml", []byte(c.Registries))
			require.NoError(t, err)
			cfg.NoDefaultEndpoint = c.NoDefaultEndpoint
			got := map[string]k3sHosts{}
			for dir, h := range cfg.hosts() {
				got[dir] = asK3s(h)
			}
			want := c.Want
			if want == nil {
				want = map[string]k3sHosts{}
			}
			assert.Equal(t, want, got)
		})
	}
}
