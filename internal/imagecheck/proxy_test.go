package imagecheck

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/registries"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
)

func TestParseEnvFile(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       map[string]string
	}{
		{"plain", "HTTP_PROXY=http://proxy:3128\nNO_PROXY=localhost,10.0.0.0/8\n",
			map[string]string{"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "localhost,10.0.0.0/8"}},
		{"comments and blank lines", "# a comment\n\n  ; another\n   \nA=1\n#B=2\n# C='no quote opens in a comment\nD=4\n",
			map[string]string{"A": "1", "D": "4"}},
		{"whitespace around key and value", "  A = one two  \r\n\tB=\t x\n", map[string]string{"A": "one two", "B": "x"}},
		{"double quotes", `A="http://p:3128"` + "\n" + `B="a \"q\" \$x \\ \n"` + "\n" + `C=  "  spaced  "  `,
			map[string]string{"A": "http://p:3128", "B": `a "q" $x \ \n`, "C": "  spaced  "}},
		{"single quotes: verbatim", `A='a "b" \$c'`, map[string]string{"A": `a "b" \$c`}},
		{"quotes over lines", "A='one\ntwo'\nB=\"three\\\nfour\"\nC=after\n", map[string]string{"A": "one\ntwo", "B": "threefour", "C": "after"}},
		{"unquoted: a backslash keeps the next, a trailing one continues", "A=a\\ b\\\\c\nB=one\\\ntwo\nC=3\n",
			map[string]string{"A": "a b\\c", "B": "onetwo", "C": "3"}},
		{"an inner # is the value's", "A=x # not a comment\n", map[string]string{"A": "x # not a comment"}},
		{"export", "export HTTPS_PROXY=http://p:3128\nexport\tNO_PROXY=.local\nexporter=1\n",
			map[string]string{"HTTPS_PROXY": "http://p:3128", "NO_PROXY": ".local", "exporter": "1"}},
		{"the later wins", "A=1\nA=2\n", map[string]string{"A": "2"}},
		{"empty value", "A=\n", map[string]string{"A": ""}},
		{"bad lines skipped", "garbage\n=novalue\n1BAD=x\nHTTP PROXY=x\nB-C=1\nGOOD=yes\n", map[string]string{"GOOD": "yes"}},
		{"an unclosed quote takes the rest", "A=1\nB=\"open\nC=2\n", map[string]string{"A": "1"}},
		{"a byte order mark", "\xef\xbb\xbfA=1\n", map[string]string{"A": "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, parseEnvFile([]byte(c.text)))
		})
	}
}

// hostRoot is a node's / with files (path relative to it: content).
func hostRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, text := range files {
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	}
	return root
}

func TestNodeProxy(t *testing.T) {
	type want struct {
		http, https, no string
		from            []string // relative to the root
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  *want // nil: no proxy
	}{
		{"no file", nil, nil},
		{"no proxy variable", map[string]string{"etc/default/k3s": "K3S_TOKEN=x\n"}, nil},
		{"NO_PROXY alone proxies nothing", map[string]string{"etc/default/rke2-server": "NO_PROXY=.local\n"}, nil},
		{"RKE2's /etc/default", map[string]string{"etc/default/rke2-server": "HTTP_PROXY=http://p:3128\nHTTPS_PROXY=http://p:3129\nNO_PROXY=10.0.0.0/8\n"},
			&want{"http://p:3128", "http://p:3129", "10.0.0.0/8", []string{"etc/default/rke2-server"}}},
		{"/etc/sysconfig", map[string]string{"etc/sysconfig/rke2-agent": "HTTPS_PROXY=http://p:3129\n"},
			&want{"", "http://p:3129", "", []string{"etc/sysconfig/rke2-agent"}}},
		{"k3s's install script's service.env", map[string]string{"etc/systemd/system/k3s-agent.service.env": "HTTPS_PROXY=http://p:3129\n"},
			&want{"", "http://p:3129", "", []string{"etc/systemd/system/k3s-agent.service.env"}}},
		{"RKE2's .env beside its unit", map[string]string{"usr/local/lib/systemd/system/rke2-server.env": "HOME=/root\nHTTPS_PROXY=http://p:3129\n"},
			&want{"", "http://p:3129", "", []string{"usr/local/lib/systemd/system/rke2-server.env"}}},
		{"CONTAINERD_ wins over the plain variable, each of its own name", map[string]string{"etc/default/k3s": "HTTP_PROXY=http://plain:1\nHTTPS_PROXY=http://plain:2\n" +
			"NO_PROXY=plain.example\nCONTAINERD_HTTPS_PROXY=http://containerd:2\nCONTAINERD_NO_PROXY=containerd.example\nCONTAINERD_LOG_LEVEL=debug\n"},
			&want{"http://plain:1", "http://containerd:2", "containerd.example", []string{"etc/default/k3s"}}},
		{"CONTAINERD_ alone", map[string]string{"etc/default/k3s": "CONTAINERD_HTTPS_PROXY=http://containerd:2\n"},
			&want{"", "http://containerd:2", "", []string{"etc/default/k3s"}}},
		{"lower case, upper case first (as Go reads them)", map[string]string{"etc/default/k3s": "https_proxy=http://lower:2\nhttp_proxy=http://lower:1\nHTTP_PROXY=http://upper:1\n"},
			&want{"http://upper:1", "http://lower:2", "", []string{"etc/default/k3s"}}},
		{"a CONTAINERD_ lower-case name does not hide the plain upper-case one", map[string]string{"etc/default/k3s": "HTTPS_PROXY=http://upper:2\nCONTAINERD_https_proxy=http://lower:2\n"},
			&want{"", "http://upper:2", "", []string{"etc/default/k3s"}}},
		{"the unit's files in systemd's order, the later winning", map[string]string{
			"etc/default/k3s":                    "HTTPS_PROXY=http://default:2\nNO_PROXY=default.example\n",
			"etc/systemd/system/k3s.service.env": "HTTPS_PROXY=http://env:2\n"},
			&want{"", "http://env:2", "default.example", []string{"etc/default/k3s", "etc/systemd/system/k3s.service.env"}}},
		{"k3s before RKE2", map[string]string{"etc/default/rke2-server": "HTTPS_PROXY=http://rke2:2\n", "etc/default/k3s": "HTTPS_PROXY=http://k3s:2\n"},
			&want{"", "http://k3s:2", "", []string{"etc/default/k3s"}}},
		{"a unit without a proxy gives way to the next", map[string]string{"etc/default/k3s": "K3S_TOKEN=x\n", "etc/default/rke2-agent": "HTTPS_PROXY=http://rke2:2\n"},
			&want{"", "http://rke2:2", "", []string{"etc/default/rke2-agent"}}},
		{"the enabled unit only", map[string]string{"etc/default/rke2-server": "HTTPS_PROXY=http://server:2\n", "etc/default/rke2-agent": "HTTPS_PROXY=http://agent:2\n",
			"etc/systemd/system/multi-user.target.wants/rke2-agent.service": ""},
			&want{"", "http://agent:2", "", []string{"etc/default/rke2-agent"}}},
		{"an enabled unit without a proxy: none", map[string]string{"etc/default/rke2-server": "HTTPS_PROXY=http://server:2\n",
			"etc/systemd/system/multi-user.target.wants/rke2-agent.service": ""}, nil},
		{"bad lines and quotes", map[string]string{"etc/default/k3s": "this is not an assignment\n# HTTP_PROXY=http://commented:1\nexport HTTPS_PROXY=\"http://quoted:2\"\n"},
			&want{"", "http://quoted:2", "", []string{"etc/default/k3s"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := hostRoot(t, c.files)
			cfg, from, err := NodeProxy(root)
			require.NoError(t, err)
			if c.want == nil {
				assert.Nil(t, cfg)
				assert.Empty(t, from)
				return
			}
			require.NotNil(t, cfg)
			assert.Equal(t, c.want.http, cfg.HTTPProxy, "HTTP_PROXY")
			assert.Equal(t, c.want.https, cfg.HTTPSProxy, "HTTPS_PROXY")
			assert.Equal(t, c.want.no, cfg.NoProxy, "NO_PROXY")
			var files []string
			for _, f := range c.want.from {
				files = append(files, filepath.Join(root, f))
			}
			assert.Equal(t, strings.Join(files, ", "), from)
		})
	}

	t.Run("no host root", func(t *testing.T) {
		cfg, from, err := NodeProxy("")
		require.NoError(t, err)
		assert.Nil(t, cfg)
		assert.Empty(t, from)
	})
	t.Run("a file that cannot be read is passed over and named", func(t *testing.T) {
		root := hostRoot(t, map[string]string{"etc/default/k3s": "HTTPS_PROXY=http://default:2\n"})
		require.NoError(t, os.MkdirAll(filepath.Join(root, "etc/systemd/system/k3s.service.env"), 0o755)) // a directory does not read
		cfg, from, err := NodeProxy(root)
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join(root, "etc/systemd/system/k3s.service.env"))
		require.NotNil(t, cfg)
		assert.Equal(t, "http://default:2", cfg.HTTPSProxy)
		assert.Equal(t, filepath.Join(root, "etc/default/k3s"), from)

		r, err := DefaultRegistries(root)
		require.NoError(t, err, "not refused")
		assert.Contains(t, r.Proxy, "from "+filepath.Join(root, "etc/default/k3s")+"; not read: ")
		assert.NotNil(t, r.proxy)
	})
	t.Run("the proxy applies per request, NO_PROXY honoured", func(t *testing.T) {
		root := hostRoot(t, map[string]string{"etc/default/rke2-server": "CONTAINERD_HTTPS_PROXY=http://proxy.example:3128\nCONTAINERD_NO_PROXY=.internal.example\n"})
		cfg, _, err := NodeProxy(root)
		require.NoError(t, err)
		proxy := cfg.ProxyFunc()
		for target, via := range map[string]string{
			"https://registry-1.docker.io/v2/":     "http://proxy.example:3128",
			"https://harbor.internal.example/v2/":  "",
			"http://plain-http.example:5000/v2/":   "", // no HTTP_PROXY
			"https://127.0.0.1:5000/v2/":           "", // loopback never is
			"https://registry.example.com:443/v2/": "http://proxy.example:3128",
		} {
			u, err := url.Parse(target)
			require.NoError(t, err)
			got, err := proxy(u)
			require.NoError(t, err)
			if via == "" {
				assert.Nil(t, got, target)
			} else {
				assert.Equal(t, via, got.String(), target)
			}
		}
	})
}

// connectProxy is an HTTP proxy on loopback that tunnels each CONNECT to
// to (whatever host it names) and records the hosts asked for.
type connectProxy struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string
}

func newConnectProxy(t *testing.T, to string) *connectProxy {
	t.Helper()
	p := &connectProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.asked = append(p.asked, r.Method+" "+r.RequestURI)
		p.mu.Unlock()
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		upstream, err := net.Dial("tcp", to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			upstream.Close()
			return
		}
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		go func() {
			_, _ = io.Copy(upstream, buf)
			upstream.Close()
		}()
		go func() {
			_, _ = io.Copy(conn, upstream)
			conn.Close()
		}()
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *connectProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// A node whose containerd pulls through a proxy (its RKE2 environment
// file) reaches a registry the tool cannot dial itself (a name no DNS
// knows): the check goes through the node's proxy and finds the image;
// without the file it cannot reach it.
func TestPullThroughNodeProxy(t *testing.T) {
	reg, err := ociregistry.Start(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(reg.Close)
	_, err = reg.PushImage("app", "1.0", "linux/amd64")
	require.NoError(t, err)
	proxy := newConnectProxy(t, reg.Host)

	// the registry's certificate is for 127.0.0.1: the node skips
	// verification for the name it is reached by, as its registries.yaml may
	registriesYAML := "configs:\n  \"registry.example.invalid\":\n    tls:\n      insecure_skip_verify: true\n"
	root := hostRoot(t, map[string]string{
		"etc/rancher/rke2/registries.yaml": registriesYAML,
		"etc/default/rke2-server":          "# the node's proxy\nexport HTTPS_PROXY=\"" + proxy.URL + "\"\nNO_PROXY=127.0.0.1,localhost\n",
	})
	r, err := DefaultRegistries(root)
	require.NoError(t, err)
	assert.Equal(t, "from "+filepath.Join(root, "etc/default/rke2-server"), r.Proxy, "the report names the file")
	p := NewPuller(r, 0)
	defer p.Close()
	img, err := registries.ParseImage("registry.example.invalid/app:1.0")
	require.NoError(t, err)
	pulled := p.Pull(t.Context(), img, nil)
	require.NotNil(t, pulled.Found, "through the node's proxy: %+v", pulled.Tried)
	assert.Equal(t, []string{"linux/amd64"}, pulled.Found.Platforms)
	require.NotEmpty(t, proxy.requests())
	for _, req := range proxy.requests() {
		assert.Equal(t, "CONNECT registry.example.invalid:443", req)
	}

	// the same node without its proxy: the name does not resolve
	if os.Getenv("HTTPS_PROXY") != "" || os.Getenv("https_proxy") != "" {
		t.Skip("this process has a proxy of its own, which a node without one is checked through")
	}
	before := len(proxy.requests())
	bare := hostRoot(t, map[string]string{"etc/rancher/rke2/registries.yaml": registriesYAML})
	r, err = DefaultRegistries(bare)
	require.NoError(t, err)
	assert.Empty(t, r.Proxy)
	direct := NewPuller(r, 0)
	defer direct.Close()
	got := direct.Pull(t.Context(), img, nil)
	assert.Nil(t, got.Found)
	require.Len(t, got.Tried, 1)
	assert.Contains(t, got.Tried[0].Said, "lookup registry.example.invalid")
	assert.Len(t, proxy.requests(), before, "not through the proxy")
}
