package managedchart

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The decoding of the Bundle's watch events, which the wait reads on
// every status write Fleet makes: the hand-written path (jsonscan.go: the
// chart's files and managedFields are stepped over, then the rest decoded
// into a map) against the library path (encoding/json into a map, as the
// dynamic client's watch decodes it; a transform of an informer runs
// after that decode, so it cannot save it). A Bundle of Rancher's carries
// the chart as spec.resources, gzip+base64: as random as the bytes below,
// from a few kilobytes (the example chart) to hundreds (Harvester's).
// docs/performance.md "Decoding the Bundle" has the figures.
func BenchmarkDecodeBundleEvents(b *testing.B) {
	const events = 50
	for _, kb := range []int{4, 64, 512} {
		stream := bundleStream(b, events, kb<<10)
		perEvent := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*events), "µs/event")
		}
		b.Run(fmt.Sprintf("chart=%dKB/scanner", kb), func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				d := &objWatchDecoder{s: newJSONStream(bytes.NewReader(stream)), cuts: bundleCuts}
				for {
					_, obj, err := d.Decode()
					if err == io.EOF {
						break
					}
					require.NoError(b, err)
					_ = ParseBundle(obj.(*unstructured.Unstructured))
				}
			}
			perEvent(b)
		})
		b.Run(fmt.Sprintf("chart=%dKB/encoding-json", kb), func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				d := json.NewDecoder(bytes.NewReader(stream))
				for {
					var ev struct {
						Type   string         `json:"type"`
						Object map[string]any `json:"object"`
					}
					err := d.Decode(&ev)
					if err == io.EOF {
						break
					}
					require.NoError(b, err)
					_ = ParseBundle(&unstructured.Unstructured{Object: ev.Object})
				}
			}
			perEvent(b)
		})
	}
}

// bundleStream is a watch stream of n MODIFIED events of bundle() with a
// chart of size bytes in spec.resources and a summary of ten clusters not
// ready, as Fleet writes it during a rollout.
func bundleStream(tb testing.TB, n, size int) []byte {
	tb.Helper()
	rnd := rand.New(rand.NewPCG(1, 2))
	chart := make([]byte, size*3/4)
	for i := range chart {
		chart[i] = byte(rnd.Uint32())
	}
	u := bundle()
	u.Object["spec"].(map[string]any)["resources"] = []any{map[string]any{
		"name": "demo-app-2.0.0.tgz", "encoding": "base64+gz", "content": base64.StdEncoding.EncodeToString(chart)}}
	var nonReady []any
	for i := range 10 {
		nonReady = append(nonReady, map[string]any{"name": fmt.Sprintf("fleet-local/sim-%04d", i+1), "bundleState": "NotReady",
			"message": "deployment.apps demo-system/demo-app [progressing] Updated: 0/1"})
	}
	status := u.Object["status"].(map[string]any)
	status["summary"] = map[string]any{"desiredReady": int64(1000), "ready": int64(990), "notReady": int64(10), "nonReadyResources": nonReady}
	var out bytes.Buffer
	for i := range n {
		u.SetResourceVersion(fmt.Sprint(100 + i))
		ev, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": u.Object})
		require.NoError(tb, err)
		out.Write(ev)
		out.WriteByte('\n')
	}
	return out.Bytes()
}
