package e2e

import (
	"context"
	"strings"
	"testing"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
)

func TestConcurrentWriterIsMergedNotLost(t *testing.T) {
	f := newFixture(t)
	name := release()
	f.install(name, "1.0.0", example.UserValues())
	opts := f.upgradeOpts(name, "2.0.0", f.policy(name))
	var attempts []int
	// between the tool's read and its write, someone else writes an
	// unrelated value
	logs, wc, err := f.upgradeCounting(f.node, opts, func(ctx context.Context, attempt int) {
		attempts = append(attempts, attempt)
		if attempt == 1 {
			f.patchManagedChart(ctx, name, `{"spec":{"values":{"extra":{"note":"written by someone else"}}}}`)
		}
	})
	require.NoError(t, err, logs)
	require.GreaterOrEqual(t, len(attempts), 2, "the first write did not conflict: %v", attempts)
	assert.Contains(t, logs, `"msg":"the managedchart changed since it was read"`)
	assert.GreaterOrEqual(t, strings.Count(logs, `"phase":"merge","duration"`), 2, "merged again on what the target held")
	t.Logf("attempts %v, writes %v", attempts, wc.seen)

	mc := f.get(name)
	// the other writer's value survived
	extra, _ := mc.Values["extra"].(map[string]any)
	assert.Equal(t, "written by someone else", extra["note"])
	// and the tool's decisions were applied on top
	assert.Equal(t, "2.0.0", mc.Version)
	assert.NotContains(t, mc.Values, "kubeVip", "the migration removed kubeVip.config")
	webhook, _ := mc.Values["webhook"].(map[string]any)
	image, _ := webhook["image"].(map[string]any)
	assert.NotContains(t, image, "tag", "follow dropped the pinned tag")
	promote, _ := mc.Values["promote"].(map[string]any)
	assert.Equal(t, "10.52.0.0/16", promote["clusterPodCIDR"], "readonly kept")
	assert.Equal(t, "2.0.0", mc.Annotations[managedchart.AnnotationVersion])
	assert.Equal(t, mc.ValuesHash(), mc.Annotations[managedchart.AnnotationValuesHash], "the annotated hash is that of the merged values")
	assert.Len(t, f.backups(name), 1, "exactly one backup")

	// and Fleet deployed exactly that
	cm := f.configMap(name + "-config")
	assert.Equal(t, "registry.example.com/demo/webhook:v0.5.6", cm["webhookImage"])
	assert.NotContains(t, cm, "kubeVipAddress")
}
