package imagecheck

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/httpclient"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/registries"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// NodeConfigs are where a k3s or RKE2 node keeps registries.yaml (RKE2's
// first), relative to the node's /.
var NodeConfigs = []string{"etc/rancher/rke2/registries.yaml", "etc/rancher/k3s/registries.yaml"}

// Registries is a node's registries.yaml with the TLS files it names read.
type Registries struct {
	Config *registries.Config
	// From says where it came from, for the report: the file, or "none".
	From string
	// Proxy says, for the report, where the proxy the node's containerd
	// pulls through came from ("from FILE", NodeProxy) and which of the
	// files that may set it could not be read; "" when the node sets none
	// and every file was read.
	Proxy string
	tls   map[*registries.TLS]httpclient.NodeTLS
	// proxy is the node's containerd proxy for a request's URL; nil when
	// the node sets none (httpclient.NodeTransport then keeps this
	// process's environment's, as before the node's was read).
	proxy func(*url.URL) (*url.URL, error)
}

// DefaultRegistries is the node's registries.yaml under hostRoot (where
// the node's / is mounted; a directory that does not exist: none): the
// first of NodeConfigs that exists, with its node's
// disable-default-registry-endpoint (config.yaml and config.yaml.d); no
// file is no mirror (each image from its own registry, the system's CAs).
// Either way the node's containerd proxy under hostRoot (NodeProxy) is
// its.
func DefaultRegistries(hostRoot string) (*Registries, error) {
	for _, rel := range NodeConfigs {
		path := filepath.Join(hostRoot, rel)
		if _, err := os.Stat(path); err == nil {
			r, err := LoadRegistries(path, hostRoot)
			if err != nil {
				return nil, err
			}
			noDefault, err := noDefaultEndpoint(filepath.Dir(path))
			if err != nil {
				return nil, err
			}
			r.Config.NoDefaultEndpoint = noDefault
			return r, nil
		}
	}
	r := &Registries{From: "none (no " + strings.Join(NodeConfigs, " nor ") + " under " + hostRoot + ")"}
	r.nodeProxy(hostRoot)
	return r, nil
}

// LoadRegistries reads the registries.yaml at path and the TLS files it
// names, and the node's containerd proxy under hostRoot (NodeProxy; none
// for ""). A file under hostRoot (a directory other than /) is the node's:
// the paths it names are read under hostRoot too. Every error is bad input naming the file
// and field: the file's own (registries.Parse), a ca_file that cannot be
// read or holds no certificate, a client certificate and key that do not
// load.
func LoadRegistries(path, hostRoot string) (*Registries, error) {
	data, err := yamlfile.Read(path, "registries config "+path)
	if errors.Is(err, fs.ErrPermission) {
		return nil, outcome.BadInput(fmt.Errorf("%w (this process runs as uid %d): make it readable to that user or group, or run as root "+
			"(plan --run-as 0:0), or check no image (--skip-image-check, images.check: false)", err, os.Geteuid()))
	}
	if err != nil {
		return nil, err
	}
	c, err := registries.Parse(path, data)
	if err != nil {
		return nil, err
	}
	r := &Registries{Config: c, From: path, tls: map[*registries.TLS]httpclient.NodeTLS{}}
	nodes := underRoot(path, hostRoot)
	onNode := func(p string) string {
		if nodes && filepath.IsAbs(p) {
			return filepath.Join(hostRoot, p)
		}
		return p
	}
	for host, hc := range c.Configs {
		if hc.TLS == nil {
			continue
		}
		at := fmt.Sprintf("%s:%d: configs[%q].tls", path, hc.Line, host)
		var t httpclient.NodeTLS
		t.SkipVerify = hc.TLS.InsecureSkipVerify
		if hc.TLS.CAFile != "" {
			pool, err := httpclient.CertPool(onNode(hc.TLS.CAFile))
			if err != nil {
				return nil, fmt.Errorf("%s.ca_file: %w", at, err) // bad input, naming the file
			}
			t.CA = pool
		}
		if hc.TLS.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(onNode(hc.TLS.CertFile), onNode(hc.TLS.KeyFile))
			if err != nil {
				return nil, outcome.BadInput(fmt.Errorf("%s.cert_file, key_file: %w", at, err))
			}
			t.Certificate = &cert
		}
		r.tls[hc.TLS] = t
	}
	r.nodeProxy(hostRoot)
	return r, nil
}

// nodeProxy sets r's proxy to the one the node's containerd pulls through
// (NodeProxy under hostRoot). A file that cannot be read is said in the
// report, not refused: the check then goes without what it would say.
func (r *Registries) nodeProxy(hostRoot string) {
	cfg, from, err := NodeProxy(hostRoot)
	if cfg != nil {
		r.proxy = cfg.ProxyFunc()
		r.Proxy = "from " + from
	}
	if err != nil {
		if r.Proxy == "" {
			r.Proxy = "none found"
		}
		why := ""
		if errors.Is(err, fs.ErrPermission) {
			why = fmt.Sprintf(", as uid %d (run as root, plan --run-as 0:0, to read it)", os.Geteuid())
		}
		r.Proxy += fmt.Sprintf("; not read%s: %s", why, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
}

// underRoot says whether path lies under hostRoot, a directory other than
// /: a file of the node seen through its mount.
func underRoot(path, hostRoot string) bool {
	if st, err := os.Stat(hostRoot); err != nil || !st.IsDir() {
		return false
	}
	root, err := filepath.Abs(hostRoot)
	if err != nil || root == "/" {
		return false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(root, abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// noDefaultEndpoint reads disable-default-registry-endpoint from the
// node's config.yaml and config.yaml.d/*.yaml in dir, as k3s merges them
// (a later file wins); a file that does not parse is bad input.
func noDefaultEndpoint(dir string) (bool, error) {
	files := []string{filepath.Join(dir, "config.yaml")}
	more, _ := filepath.Glob(filepath.Join(dir, "config.yaml.d", "*.yaml"))
	files = append(files, more...)
	out := false
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, outcome.BadInput(fmt.Errorf("reading the node's config %s: %w", f, err))
		}
		var cfg map[string]any
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return false, outcome.BadInput(fmt.Errorf("reading the node's config %s: %w", f, err))
		}
		switch v := cfg["disable-default-registry-endpoint"].(type) {
		case bool:
			out = v
		case string:
			out = v == "true"
		}
	}
	return out, nil
}

// nodeTLS is how the node reaches e's host.
func (r *Registries) nodeTLS(e registries.Endpoint) httpclient.NodeTLS {
	t := httpclient.NodeTLS{SkipVerify: e.InsecureSkipVerify}
	if r != nil {
		t.Proxy = r.proxy
	}
	if r != nil && e.TLS != nil {
		if read, ok := r.tls[e.TLS]; ok {
			t.CA, t.Certificate = read.CA, read.Certificate
		}
	}
	return t
}
