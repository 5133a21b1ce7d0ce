package managedchart

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// bundle is a Bundle as Rancher and Fleet write it: the chart's files,
// managedFields, a summary.
func bundle() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Bundle",
		"metadata": map[string]any{"name": "mcc-app", "namespace": "fleet-local", "generation": int64(4),
			"resourceVersion": "42", "managedFields": []any{map[string]any{"manager": "rancher"}}},
		"spec": map[string]any{"helm": map[string]any{"version": "2.0.0", "values": map[string]any{"a": int64(1)}},
			"resources": []any{map[string]any{"name": "templates/cm.yaml", "content": "…"}}},
		"status": map[string]any{"observedGeneration": int64(4), "summary": map[string]any{"desiredReady": int64(1), "ready": int64(1)},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}}
}

func TestWatchedObjectsKeepWhatReadinessReads(t *testing.T) {
	bundle := bundle()
	slim, err := cutObjectJSON([]byte(toJSON(t, bundle.Object)), bundleCuts)
	require.NoError(t, err)
	assert.Equal(t, ParseBundle(bundle), ParseBundle(slim))
	_, hasResources, _ := unstructured.NestedSlice(slim.Object, "spec", "resources")
	assert.False(t, hasResources, "the chart's files are not decoded")
	assert.Nil(t, slim.GetManagedFields())

	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "management.cattle.io/v3", "kind": "ManagedChart",
		"metadata": map[string]any{"name": "app", "namespace": "fleet-local", "uid": "u-1", "resourceVersion": "9",
			"annotations":   map[string]any{AnnotationVersion: "2.0.0"},
			"managedFields": []any{map[string]any{"manager": "rancher"}}},
		"spec": map[string]any{"chart": "app", "version": "2.0.0", "paused": false, "values": map[string]any{"a": int64(1)}},
		"status": map[string]any{"observedGeneration": int64(4), "summary": map[string]any{"desiredReady": int64(1), "ready": int64(1)},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"},
				map[string]any{"type": "Defined", "status": "False", "message": "no chart version found"}}},
	}}
	slim, err = cutObjectJSON([]byte(toJSON(t, mc.Object)), managedChartCuts)
	require.NoError(t, err)
	full, err := ParseManagedChart(mc)
	require.NoError(t, err)
	got, err := ParseManagedChart(slim)
	require.NoError(t, err)
	want, have := full.Observed(), got.Observed()
	want.Source, have.Source = nil, nil
	assert.Equal(t, want, have, "what the wait judges of the target is kept")
	assert.Equal(t, full.Status.Conditions, got.Status.Conditions, "the Defined condition is kept")
	_, hasSummary, _ := unstructured.NestedMap(slim.Object, "status", "summary")
	assert.False(t, hasSummary, "Rancher's copy of the Bundle summary is not decoded")
}

func TestEvaluateNamesPendingBundleDeploymentsOnlyWithoutFleetsList(t *testing.T) {
	want, mc, b, bds := world()
	bds[0].Ready, bds[0].NonReady = false, []string{"Deployment demo/app: in-progress"}
	r := Evaluate(want, mc, b, bds)
	assert.Equal(t, []string{"cluster-a/mcc-app not ready: Deployment demo/app: in-progress"}, r.NonReady)

	b.Status.Summary.NonReadyResources = []NonReadyResource{{Name: "fleet-local/local", State: "NotReady"}}
	r = Evaluate(want, mc, b, bds)
	assert.Equal(t, []string{"fleet-local/local (NotReady)"}, r.NonReady, "Fleet's own list wins")
}

func TestObserverParsesOncePerResourceVersionAndHashesOncePerSpec(t *testing.T) {
	inf := func() cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	}
	o := &Observer{namespace: "fleet-local", name: "app", mc: inf(), bundle: inf()}
	mc, b := o.parsed()
	assert.Nil(t, mc)
	assert.Nil(t, b)

	at := func(rv string, generation int64, version string, vals map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "app", "namespace": "fleet-local", "uid": "u-1",
				"resourceVersion": rv, "generation": generation},
			"spec": map[string]any{"version": version, "values": vals},
		}}
	}
	hash := func(vals map[string]any) string {
		h, err := values.Hash(vals)
		require.NoError(t, err)
		return h
	}
	one, two := map[string]any{"a": int64(1)}, map[string]any{"a": int64(2)}

	require.NoError(t, o.mc.GetStore().Add(at("7", 1, "1.0.0", one)))
	first, _ := o.parsed()
	require.NotNil(t, first)
	again, _ := o.parsed()
	assert.Same(t, first, again, "the same resourceVersion is parsed once")
	assert.Equal(t, hash(one), first.valuesHash, "and hashed then")

	// a status write: a new resourceVersion, the same generation. (The
	// values cannot change without a new generation; here they do, to
	// show that the hash is kept, not worked out again.)
	require.NoError(t, o.mc.GetStore().Update(at("8", 1, "1.0.0", two)))
	status, _ := o.parsed()
	assert.NotSame(t, first, status, "parsed again")
	assert.Equal(t, hash(one), status.valuesHash, "the hash of the same spec is kept")

	require.NoError(t, o.mc.GetStore().Update(at("9", 2, "2.0.0", two)))
	next, _ := o.parsed()
	assert.Equal(t, "2.0.0", next.Version)
	assert.Equal(t, hash(two), next.valuesHash, "a new spec is hashed")
	assert.Equal(t, "1.0.0", first.Version, "an earlier parse is never changed")
	assert.NotSame(t, next, o.Current(), "Current is a copy of its own")
}

func TestWatchErrorsSaySomethingOnlyForABrokenWatch(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	refused := errors.New(`Get "https://127.0.0.1:6443/apis/fleet.cattle.io/v1alpha1/bundles?watch=true": dial tcp 127.0.0.1:6443: connect: connection refused`)
	expired := apierrors.NewResourceExpired("too old resource version: 1 (42)")

	cases := []struct {
		name      string
		ctx, hctx context.Context
		err       error
		level     string // "" for nothing logged
	}{
		{"the Observer was stopped", stopped, live, context.Canceled, ""},
		{"the informer was stopped", live, stopped, refused, ""},
		{"closed normally", live, live, io.EOF, ""},
		{"expired: re-listed", live, live, expired, "DEBUG"},
		{"cut: re-listed", live, live, io.ErrUnexpectedEOF, "DEBUG"},
		{"the API server is down", live, live, refused, "WARN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf.Reset()
			cluster.WatchErrors(tc.ctx, log, "bundles")(tc.hctx, nil, tc.err)
			if tc.level == "" {
				assert.Empty(t, buf.String())
				return
			}
			var rec map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), buf.String())
			assert.Equal(t, tc.level, rec["level"])
			assert.Equal(t, "bundles", rec["resource"])
			assert.Equal(t, tc.err.Error(), rec["err"])
		})
	}
	// no logger: nothing to say, and no panic
	cluster.WatchErrors(live, nil, "bundles")(live, nil, refused)
}
