package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

func TestNamedListWatchSelectsTheOneName(t *testing.T) {
	var listed, watched metav1.ListOptions
	lw := NamedListWatch(
		func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			listed = o
			return &unstructured.UnstructuredList{}, nil
		},
		func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			watched = o
			return watch.NewEmptyWatch(), nil
		}, "web-config")

	_, err := lw.ListWithContextFunc(context.Background(), metav1.ListOptions{LabelSelector: "a=b", ResourceVersion: "0"})
	require.NoError(t, err)
	w, err := lw.WatchFuncWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "42", AllowWatchBookmarks: true})
	require.NoError(t, err)
	w.Stop()

	assert.Equal(t, metav1.ListOptions{FieldSelector: "metadata.name=web-config", LabelSelector: "a=b", ResourceVersion: "0"}, listed)
	assert.Equal(t, metav1.ListOptions{FieldSelector: "metadata.name=web-config", ResourceVersion: "42", AllowWatchBookmarks: true}, watched)
}

// A Signal keeps one notification however many came, never blocks, and
// is empty once received.
func TestSignalCoalesces(t *testing.T) {
	s := NewSignal()
	for range 5 {
		s.Notify()
	}
	assert.Len(t, s, 1)
	<-s
	assert.Empty(t, s)
	h := OnEvent(s.Notify)
	h.OnAdd(nil, false)
	h.OnUpdate(nil, nil)
	h.OnDelete(nil)
	assert.Len(t, s, 1, "every event notifies; still one pending")
}
