package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/logbuf"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// kubeconfig writes a kubeconfig for server authenticating with token.
func kubeconfig(t *testing.T, server, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
contexts:
- name: c
  context: {cluster: c, user: u, namespace: ignored}
current-context: c
users:
- name: u
  user: {token: %q}
`, server, token)
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}

func TestRESTConfigFromTheFlagRaisesTheRateLimits(t *testing.T) {
	// the flag wins over $KUBECONFIG
	t.Setenv("KUBECONFIG", kubeconfig(t, "https://from-env.example:6443", "env-token"))
	cfg, err := RESTConfig(kubeconfig(t, "https://from-flag.example:6443", "flag-token"))
	require.NoError(t, err)
	assert.Equal(t, "https://from-flag.example:6443", cfg.Host)
	assert.Equal(t, "flag-token", cfg.BearerToken)
	assertLimits(t, cfg)
}

func TestRESTConfigFromTheEnvironment(t *testing.T) {
	t.Setenv("KUBECONFIG", kubeconfig(t, "https://from-env.example:6443", "env-token"))
	cfg, err := RESTConfig("")
	require.NoError(t, err)
	assert.Equal(t, "https://from-env.example:6443", cfg.Host)
	assert.Equal(t, "env-token", cfg.BearerToken)
	assertLimits(t, cfg)
}

func TestRESTConfigErrorsAreBadInputNamingTheSource(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")

	_, err := RESTConfig(missing)
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), "--kubeconfig "+missing+": "), err.Error())

	// a $KUBECONFIG naming no file is an empty configuration
	t.Setenv("KUBECONFIG", missing)
	_, err = RESTConfig("")
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.True(t, strings.HasPrefix(err.Error(), "$KUBECONFIG "+missing+": "), err.Error())
}

// outOfCluster makes RESTConfig's last resort, ~/.kube/config, a file of
// the test's (client-go reads the path once, when it starts).
func outOfCluster(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	was := clientcmd.RecommendedHomeFile
	clientcmd.RecommendedHomeFile = filepath.Join(home, ".kube", "config")
	t.Cleanup(func() { clientcmd.RecommendedHomeFile = was })
	return clientcmd.RecommendedHomeFile
}

func TestRESTConfigWithoutAnyClusterAccess(t *testing.T) {
	outOfCluster(t)
	_, err := RESTConfig("")
	require.Error(t, err)
	assert.ErrorIs(t, err, outcome.ErrBadInput)
	assert.EqualError(t, err, "no cluster access: not in a cluster, and no --kubeconfig, $KUBECONFIG or ~/.kube/config: give --kubeconfig FILE (or set KUBECONFIG)",
		"the fix, not client-go's KUBERNETES_MASTER")
}

func TestRESTConfigFallsBackToTheHomeKubeconfig(t *testing.T) {
	home := outOfCluster(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(home), 0o700))
	data, err := os.ReadFile(kubeconfig(t, "https://from-home.example:6443", "home-token"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(home, data, 0o600))
	cfg, err := RESTConfig("")
	require.NoError(t, err)
	assert.Equal(t, "https://from-home.example:6443", cfg.Host)
	assert.Equal(t, "home-token", cfg.BearerToken)
	assertLimits(t, cfg)
}

func TestRESTConfigErrorsDoNotShowCredentials(t *testing.T) {
	for name, doc := range map[string]string{
		"broken YAML":           "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: tok-SECRET-1\n    password: [pw-SECRET-2\n",
		"token of a bad type":   "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: {a: tok-SECRET-1}\n",
		"users of a bad type":   "apiVersion: v1\nkind: Config\nusers: tok-SECRET-1\n",
		"unreadable client key": "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://x:1'}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: tok-SECRET-1, client-key: /nonexistent/key, client-certificate: /nonexistent/cert}\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
			cfg, err := RESTConfig(path)
			require.Error(t, err)
			assert.Nil(t, cfg)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.Contains(t, err.Error(), path)
			assert.NotContains(t, err.Error(), "SECRET")
		})
	}
}

func TestNewClientsMakesNoRequestAndDefaultsTheLog(t *testing.T) {
	// nothing listens there: building the clients must not need it
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	c, err := NewClients(cfg, nil)
	require.NoError(t, err)
	assert.Same(t, cfg, c.Config)
	require.NotNil(t, c.Log, "a nil log is replaced, so c.Log.Warn never panics")
	c.Log.Warn("discarded")
	assert.NotNil(t, c.Kube)
	assert.NotNil(t, c.Dynamic)
	assert.NotNil(t, c.Mapper)

	log := slog.New(slog.DiscardHandler)
	c, err = NewClients(cfg, log)
	require.NoError(t, err)
	assert.Same(t, log, c.Log)

	// a config the clients cannot use is an error naming the client
	_, err = NewClients(&rest.Config{Host: "https://127.0.0.1:1",
		TLSClientConfig: rest.TLSClientConfig{CAFile: "/nonexistent/ca.crt"}}, nil)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "building the kubernetes client: "), err.Error())
}

func TestNoWatchListTurnsTheStreamingListOff(t *testing.T) {
	assert.True(t, NoWatchList{}.IsWatchListSemanticsUnSupported())
}

// logged is a slog.Logger at debug level and the records it wrote.
func logged(t *testing.T) (*slog.Logger, func() []map[string]any) {
	var b logbuf.Buffer
	return b.Logger(), func() []map[string]any { return b.Records(t) }
}

func TestWatchErrorsSortsWhatEndedAWatch(t *testing.T) {
	gone := apierrors.NewGone("too old resource version")
	expired := apierrors.NewResourceExpired("resource version 5 expired")
	down := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	for _, tc := range []struct {
		name string
		err  error
		want string // the level logged, "" for nothing
	}{
		{"a watch ended by the server", io.EOF, ""},
		{"resource version gone", gone, "DEBUG"},
		{"resource version expired", expired, "DEBUG"},
		{"connection cut", io.ErrUnexpectedEOF, "DEBUG"},
		{"wrapped cut", fmt.Errorf("watch: %w", io.ErrUnexpectedEOF), "DEBUG"},
		{"server down", down, "WARN"},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("no")), "WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, records := logged(t)
			WatchErrors(context.Background(), log, "secrets")(context.Background(), nil, tc.err)
			if tc.want == "" {
				assert.Empty(t, records())
				return
			}
			msg := "watch broken; re-listing"
			if tc.want == "DEBUG" {
				msg = "watch closed; re-listing"
			}
			assert.Equal(t, []map[string]any{{"level": tc.want, "msg": msg, "resource": "secrets", "err": tc.err.Error()}}, records())
		})
	}
}

func TestWatchErrorsIsQuietOnceStopped(t *testing.T) {
	down := errors.New("connection refused")
	stopped, stop := context.WithCancel(context.Background())
	stop()

	log, records := logged(t)
	WatchErrors(stopped, log, "configmaps")(context.Background(), nil, down)
	assert.Empty(t, records(), "the Observer was stopped")

	WatchErrors(context.Background(), log, "configmaps")(stopped, nil, down)
	assert.Empty(t, records(), "the informer was stopped")

	// without a log nothing panics
	WatchErrors(context.Background(), nil, "configmaps")(context.Background(), nil, down)
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lease := func(renewed time.Time, secs int32) *coordinationv1.Lease {
		r := metav1.NewMicroTime(renewed)
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &r, LeaseDurationSeconds: &secs}}
	}
	assert.False(t, expired(lease(now.Add(-10*time.Second), 30), now), "renewed 10s ago, held for 30s")
	assert.False(t, expired(lease(now.Add(-30*time.Second), 30), now), "exactly at the end it is still held")
	assert.True(t, expired(lease(now.Add(-31*time.Second), 30), now))
	assert.True(t, expired(lease(now.Add(-time.Second), 0), now), "a zero duration ends at once")
	assert.False(t, expired(lease(now.Add(time.Minute), 1), now), "renewed by a clock ahead of ours")

	secs := int32(30)
	r := metav1.NewMicroTime(now)
	assert.True(t, expired(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &secs}}, now), "never renewed")
	assert.True(t, expired(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &r}}, now), "no duration")
}

func TestHelmGetterNamesTheServerAndTheNamespace(t *testing.T) {
	cfg := &rest.Config{Host: "https://api.example:6443", BearerToken: "tok"}
	g := NewHelmGetter(cfg)
	cfg.Host = "https://changed.example" // the getter took a copy

	a, b := g.For("team-a"), g.For("team-b")
	for ns, n := range map[string]*NamespacedHelmGetter{"team-a": a, "team-b": b} {
		got, overridden, err := n.ToRawKubeConfigLoader().Namespace()
		require.NoError(t, err)
		assert.Equal(t, ns, got)
		assert.False(t, overridden)
		raw, err := n.ToRawKubeConfigLoader().RawConfig()
		require.NoError(t, err)
		assert.Equal(t, "https://api.example:6443", raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster].Server)
	}

	rc, err := a.ToRESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://api.example:6443", rc.Host)
	assert.Equal(t, "tok", rc.BearerToken)
	rc.Host = "https://mutated.example"
	rc2, err := b.ToRESTConfig()
	require.NoError(t, err)
	assert.Equal(t, "https://api.example:6443", rc2.Host, "each call is a copy")

	// one discovery cache and mapper for every namespace, built without a request
	da, err := a.ToDiscoveryClient()
	require.NoError(t, err)
	db, err := b.ToDiscoveryClient()
	require.NoError(t, err)
	assert.Same(t, da, db)
	ma, err := a.ToRESTMapper()
	require.NoError(t, err)
	mb, err := b.ToRESTMapper()
	require.NoError(t, err)
	assert.Same(t, ma, mb)
}

func TestHelmGetterReportsAConfigItCannotUse(t *testing.T) {
	g := NewHelmGetter(&rest.Config{Host: "https://api.example:6443",
		TLSClientConfig: rest.TLSClientConfig{CAFile: "/nonexistent/ca.crt"}})
	_, err := g.For("x").ToDiscoveryClient()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/ca.crt")
	_, err2 := g.For("y").ToRESTMapper()
	assert.Equal(t, err, err2, "the error is kept, not retried")
	g.Reset() // does nothing, does not panic
}

// assertLimits: every REST config chart-upgrader builds raises client-go's
// rate limits and names itself.
func assertLimits(t *testing.T, cfg *rest.Config) {
	t.Helper()
	assert.Equal(t, float32(50), cfg.QPS)
	assert.Equal(t, 100, cfg.Burst)
	assert.Equal(t, "chart-upgrader", cfg.UserAgent)
}
