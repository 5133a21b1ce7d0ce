// Package k3scases is k3s's own test of the hosts.toml it writes for a
// registries.yaml (Test_UnitGetHostConfigs in k3s-io/k3s
// pkg/agent/containerd/config_test.go), transcribed as data in
// testdata/k3s-host-configs.yaml (its header says from which commit, and
// which cases it leaves out). Both readings of registries.yaml are held to
// it: internal/registries, the image check's, and tests/kubelet's, written
// apart from it as the e2e tests' oracle.
package k3scases

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	yaml "go.yaml.in/yaml/v3"
)

// Case is one case: a registries.yaml and the hosts.toml k3s writes for
// it, by directory ("_default" for "*").
type Case struct {
	Name              string         `yaml:"name"`
	NoDefaultEndpoint bool           `yaml:"noDefaultEndpoint"`
	Registries        string         `yaml:"registries"`
	Want              map[string]Dir `yaml:"want"`
}

// Dir is one directory's hosts.toml.
type Dir struct {
	Server     *string    `yaml:"server"` // nil: no URL; "": the pulled registry's own
	ServerAuth bool       `yaml:"serverAuth"`
	ServerTLS  *TLS       `yaml:"serverTLS"`
	Endpoints  []Endpoint `yaml:"endpoints"`
}

// Endpoint is one mirror endpoint of a hosts.toml, in order.
type Endpoint struct {
	URL          string            `yaml:"url"`
	OverridePath bool              `yaml:"overridePath"`
	Auth         bool              `yaml:"auth"`
	TLS          *TLS              `yaml:"tls"`
	Rewrites     map[string]string `yaml:"rewrites"`
}

// TLS is a host's TLS settings.
type TLS struct {
	CAFile             string `yaml:"caFile"`
	CertFile           string `yaml:"certFile"`
	KeyFile            string `yaml:"keyFile"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify"`
}

// Load reads the cases; an empty Want is an empty map.
func Load() ([]Case, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, fmt.Errorf("k3scases: cannot tell where the package is")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "testdata", "k3s-host-configs.yaml"))
	if err != nil {
		return nil, err
	}
	var cases []Case
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return nil, fmt.Errorf("k3scases: %w", err)
	}
	for i := range cases {
		if cases[i].Want == nil {
			cases[i].Want = map[string]Dir{}
		}
	}
	return cases, nil
}
