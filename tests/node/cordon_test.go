package nodes

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/node"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// TestCordonRecordsItsOwn: cordon marks the node and records it, a second
// cordon changes nothing; uncordon undoes it, a second uncordon changes
// nothing.
func TestCordonRecordsItsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	var out buffer
	opts := node.Options{Out: &out}

	start := time.Now().Add(-time.Second)
	changed, err := node.Cordon(ctx, f.kube, f.node, opts)
	require.NoError(t, err)
	assert.True(t, changed)
	f.requireCordonedByUs(f.node)
	at, err := time.Parse(time.RFC3339, f.getNode(f.node).Annotations[node.AnnotationCordoned])
	require.NoError(t, err, "the record is an RFC 3339 time")
	assert.WithinRange(t, at, start, time.Now().Add(time.Second))
	rv := f.getNode(f.node).ResourceVersion

	changed, err = node.Cordon(ctx, f.kube, f.node, opts)
	require.NoError(t, err)
	assert.False(t, changed, "second cordon")
	assert.Equal(t, rv, f.getNode(f.node).ResourceVersion, "second cordon wrote the node")

	changed, err = node.Uncordon(ctx, f.kube, f.node, opts)
	require.NoError(t, err)
	assert.True(t, changed)
	f.requireSchedulable(f.node)
	rv = f.getNode(f.node).ResourceVersion

	changed, err = node.Uncordon(ctx, f.kube, f.node, opts)
	require.NoError(t, err)
	assert.False(t, changed, "second uncordon")
	assert.Equal(t, rv, f.getNode(f.node).ResourceVersion, "second uncordon wrote the node")

	assert.Equal(t, "node/"+f.node+" cordoned\n"+
		"node/"+f.node+" already cordoned by chart-upgrader (since "+at.Format(time.RFC3339)+")\n"+
		"node/"+f.node+" uncordoned\n"+
		"node/"+f.node+" not cordoned: nothing to do\n", out.String())
}

// TestForeignCordonLeftAlone: a node someone else cordoned gets no record
// from cordon, and uncordon leaves it cordoned, also after a drain.
func TestForeignCordonLeftAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	name := f.newNode(true)
	rv := f.getNode(name).ResourceVersion
	var out buffer

	changed, err := node.Cordon(ctx, f.kube, name, node.Options{Out: &out})
	require.NoError(t, err)
	assert.False(t, changed)
	require.NoError(t, node.Drain(ctx, f.kube, name, node.DrainOptions{Timeout: 30 * time.Second, Out: &out}))
	changed, err = node.Uncordon(ctx, f.kube, name, node.Options{Out: &out})
	require.NoError(t, err)
	assert.False(t, changed)

	n := f.getNode(name)
	assert.True(t, n.Spec.Unschedulable, "still cordoned")
	assert.NotContains(t, n.Annotations, node.AnnotationCordoned)
	assert.Equal(t, rv, n.ResourceVersion, "the node was written")
	assert.Contains(t, out.String(), "node/"+name+" already cordoned, not by chart-upgrader: left as is, and uncordon will not touch it\n")
	assert.Contains(t, out.String(), "node/"+name+" cordoned by someone else, not by chart-upgrader: left cordoned\n")
}

// TestUncordonAfterForeignUncordon: someone uncordoned the node we
// cordoned; uncordon removes the stale record and leaves the node
// schedulable.
func TestUncordonAfterForeignUncordon(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, err := node.Cordon(ctx, f.kube, f.node, node.Options{})
	require.NoError(t, err)
	_, err = f.kube.CoreV1().Nodes().Patch(ctx, f.node, types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	var out buffer
	changed, err := node.Uncordon(ctx, f.kube, f.node, node.Options{Out: &out})
	require.NoError(t, err)
	assert.True(t, changed)
	f.requireSchedulable(f.node)
	assert.Equal(t, "node/"+f.node+" already uncordoned by someone else: removed chart-upgrader's cordon record\n", out.String())

	// cordoning again records a fresh cordon
	changed, err = node.Cordon(ctx, f.kube, f.node, node.Options{})
	require.NoError(t, err)
	assert.True(t, changed)
	f.requireCordonedByUs(f.node)
}

// TestConcurrentChange: another writer changes the node between our read
// and our write. The write is refused (resourceVersion precondition), the
// node read again and the decision taken again, so nothing is lost.
func TestConcurrentChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	patch := func(name, body string) func() {
		return func() {
			_, err := f.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			require.NoError(t, err)
		}
	}

	t.Run("someone else cordons first", func(t *testing.T) {
		name := f.newNode(false)
		kube := &racingKube{Interface: f.kube, before: patch(name, `{"spec":{"unschedulable":true}}`)}
		changed, err := node.Cordon(ctx, kube, name, node.Options{})
		require.NoError(t, err)
		assert.False(t, changed, "the node was cordoned by someone else")
		assert.NotContains(t, f.getNode(name).Annotations, node.AnnotationCordoned, "no record on someone else's cordon")
		_, err = node.Uncordon(ctx, f.kube, name, node.Options{})
		require.NoError(t, err)
		assert.True(t, f.getNode(name).Spec.Unschedulable, "uncordon left someone else's cordon")
	})
	t.Run("someone else labels the node", func(t *testing.T) {
		name := f.newNode(false)
		kube := &racingKube{Interface: f.kube, before: patch(name, `{"metadata":{"labels":{"example.com/zone":"a"}}}`)}
		changed, err := node.Cordon(ctx, kube, name, node.Options{})
		require.NoError(t, err)
		assert.True(t, changed)
		f.requireCordonedByUs(name)
		assert.Equal(t, "a", f.getNode(name).Labels["example.com/zone"])
	})
	t.Run("an admin takes the cordon over", func(t *testing.T) {
		name := f.newNode(false)
		_, err := node.Cordon(ctx, f.kube, name, node.Options{})
		require.NoError(t, err)
		// removing the record says "this cordon is mine now", between
		// our read and our write
		kube := &racingKube{Interface: f.kube, before: patch(name, `{"metadata":{"annotations":{"`+node.AnnotationCordoned+`":null}}}`)}
		changed, err := node.Uncordon(ctx, kube, name, node.Options{})
		require.NoError(t, err)
		assert.False(t, changed)
		assert.True(t, f.getNode(name).Spec.Unschedulable, "uncordon left a cordon that is no longer recorded as ours")
	})
}

// TestNodeNotFound: a node that does not exist is a refusal (exit 3),
// named in the error.
func TestNodeNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, errCordon := node.Cordon(ctx, f.kube, "no-such-node", node.Options{})
	_, errUncordon := node.Uncordon(ctx, f.kube, "no-such-node", node.Options{})
	errDrain := node.Drain(ctx, f.kube, "no-such-node", node.DrainOptions{})
	for _, tc := range []struct {
		doing string
		err   error
	}{{"cordoning", errCordon}, {"uncordoning", errUncordon}, {"cordoning", errDrain}} {
		require.Error(t, tc.err, tc.doing)
		assert.True(t, errors.Is(tc.err, outcome.ErrRefused), "%s: %v", tc.doing, tc.err)
		assert.Equal(t, outcome.ExitRefused, outcome.Code(tc.err))
		assert.Equal(t, tc.doing+` node "no-such-node": nodes "no-such-node" not found`, tc.err.Error())
	}
}
