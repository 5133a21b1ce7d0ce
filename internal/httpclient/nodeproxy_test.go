package httpclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpproxy"
)

// A transport built with a node's proxy sends each request through it
// (an HTTP proxy on loopback, which records the absolute URL it is asked
// for and answers itself), but for a host the node's NO_PROXY names.
func TestNodeTransportProxy(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.RequestURI)
		mu.Unlock()
		_, _ = io.WriteString(w, "through the proxy")
	}))
	t.Cleanup(proxy.Close)
	node := httpproxy.Config{HTTPProxy: proxy.URL, NoProxy: "direct.example.invalid"}
	tr := NodeTransport(NodeTLS{Proxy: node.ProxyFunc()})
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	resp, err := get(t, c, "http://registry.example.invalid:5000/v2/app/manifests/1.0")
	require.NoError(t, err, "a name no DNS knows, reached through the proxy")
	body, err := ReadAll(resp, 1<<10)
	require.NoError(t, err)
	assert.Equal(t, "through the proxy", string(body))
	mu.Lock()
	assert.Equal(t, []string{"GET http://registry.example.invalid:5000/v2/app/manifests/1.0"}, asked, "the absolute URL, as a proxy is asked")
	mu.Unlock()

	_, err = get(t, c, "http://direct.example.invalid/v2/")
	require.Error(t, err, "NO_PROXY: dialed directly, and the name does not resolve")
	mu.Lock()
	assert.Len(t, asked, 1, "not through the proxy")
	mu.Unlock()

	// without the node's proxy: this process's environment's, as before
	assert.NotNil(t, NodeTransport(NodeTLS{}).Proxy, "the proxy from the environment")
}
