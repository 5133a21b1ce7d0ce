//go:build testseams

package helmrelease_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	helmstatus "helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/dynamic"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// A revision whose object does not exist: its informer lists nothing and
// sends no event, yet the end of that first list is signalled, so a
// waiter that judges only on signals sees "not found" without a heartbeat.
func TestWatcherSignalsTheEndOfAnEmptyFirstList(t *testing.T) {
	env := testenv.ForTest(t)
	ns := env.Namespace(t)
	store(t, driver.NewSecrets(env.Kube().CoreV1().Secrets(ns)),
		rel(ns, "gone", 1, helmstatus.StatusDeployed, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: gone-config}\n"))
	// the object's first list is held back until the test has taken the
	// storage's signal, so the end of that list comes after it
	cfg := env.Config()
	hold := make(chan struct{})
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if strings.Contains(r.URL.Path, "/configmaps") && r.URL.Query().Get("watch") == "" {
				<-hold
			}
			return rt.RoundTrip(r)
		})
	})
	c := &helmrelease.Client{Kube: env.Kube(), Dynamic: dynamic.NewForConfigOrDie(cfg)}
	sig := cluster.NewSignal()
	w, err := c.Watch(t.Context(), ns, "gone", "secret", sig.Notify)
	require.NoError(t, err)
	// the storage's own event has signalled by now; what comes after it
	// must be the object informer's end of list
	select {
	case <-sig:
	default:
	}
	close(hold)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safety net against a hang only
	defer cancel()
	for w.Resources() == nil {
		select {
		case <-sig:
		case <-ctx.Done():
			t.Fatal("no signal after the first (empty) list of the revision's object")
		}
	}
	assert.Equal(t, []string{"ConfigMap gone-config: not found"}, w.Resources().NotReady)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
