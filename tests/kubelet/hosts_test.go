package kubelet

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// k3sCases is the transcription of k3s's own Test_UnitGetHostConfigs
// (its header says from which commit, and which cases it leaves out),
// which package registries is held to as well.
const k3sCases = "../../internal/registries/testdata/k3s-host-configs.yaml"

// k3sCase is one case: a registries.yaml and the hosts.toml k3s writes
// for it, by directory.
type k3sCase struct {
	Name              string                 `yaml:"name"`
	NoDefaultEndpoint bool                   `yaml:"noDefaultEndpoint"`
	Registries        string                 `yaml:"registries"`
	Want              map[string]k3sHostsDir `yaml:"want"`
}

type k3sHostsDir struct {
	Server     *string       `yaml:"server"` // nil: no URL; "": the pulled registry
	ServerAuth bool          `yaml:"serverAuth"`
	ServerTLS  *k3sTLS       `yaml:"serverTLS"`
	Endpoints  []k3sEndpoint `yaml:"endpoints"`
}

type k3sEndpoint struct {
	URL          string            `yaml:"url"`
	OverridePath bool              `yaml:"overridePath"`
	Auth         bool              `yaml:"auth"`
	TLS          *k3sTLS           `yaml:"tls"`
	Rewrites     map[string]string `yaml:"rewrites"`
}

type k3sTLS struct {
	CAFile             string `yaml:"caFile"`
	CertFile           string `yaml:"certFile"`
	KeyFile            string `yaml:"keyFile"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify"`
}

func asK3sTLS(t *tlsSpec) *k3sTLS {
	if t == nil {
		return nil
	}
	return &k3sTLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, InsecureSkipVerify: t.InsecureSkipVerify}
}

// asK3s is a directory in the cases' shape.
func asK3s(d hostsDir) k3sHostsDir {
	var out k3sHostsDir
	if s := d.server; s != nil {
		if s.url != nil {
			u := s.url.String()
			out.Server = &u
		}
		out.ServerAuth, out.ServerTLS = s.config.Auth != nil, asK3sTLS(s.config.TLS)
	}
	for _, ep := range d.endpoints {
		out.Endpoints = append(out.Endpoints, k3sEndpoint{URL: ep.url.String(), OverridePath: ep.overridePath,
			Auth: ep.config.Auth != nil, TLS: asK3sTLS(ep.config.TLS), Rewrites: ep.rewrites})
	}
	return out
}

// The test kubelet's hosts.toml are k3s's own, case by case of k3s's
// test.
func TestHostsAreK3sOwn(t *testing.T) {
	data, err := os.ReadFile(k3sCases)
	require.NoError(t, err)
	var cases []k3sCase
	require.NoError(t, yaml.Unmarshal(data, &cases))
	require.GreaterOrEqual(t, len(cases), 30, "the transcribed cases")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var f registriesFile
			require.NoError(t, yaml.Unmarshal([]byte(c.Registries), &f))
			got := map[string]k3sHostsDir{}
			for dir, h := range hosts(&f, c.NoDefaultEndpoint) {
				got[dir] = asK3s(h)
			}
			want := c.Want
			if want == nil {
				want = map[string]k3sHostsDir{}
			}
			assert.Equal(t, want, got)
		})
	}
	t.Logf("%d cases of k3s's", len(cases))
}
