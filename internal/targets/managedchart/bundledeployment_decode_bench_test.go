package managedchart

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The decoding of BundleDeployment watch events of real weight, by three
// paths (docs/performance.md "Decoding BundleDeployments"):
//   - scanner: the hand-written stream (jsonscan.go, readBD);
//   - narrow: encoding/json into a struct of the fields readiness reads
//     (narrowBD), as a reflector fed by a json.Decoder would decode them;
//   - unstructured: encoding/json into maps, as the dynamic client does.
//
// The stream is a watch of testdata/bundledeployment-weight.json (a
// BundleDeployment as the API server served it in `make bench-scale`:
// 11.6 KB, twelve resources), each event with its own resourceVersion and
// deployment state.

// weightStream is a watch stream of n MODIFIED events of the weighted
// BundleDeployment.
func weightStream(tb testing.TB, n int) []byte {
	tb.Helper()
	data, err := os.ReadFile("testdata/bundledeployment-weight.json")
	require.NoError(tb, err)
	var obj map[string]any
	require.NoError(tb, json.Unmarshal(data, &obj))
	meta := obj["metadata"].(map[string]any)
	status := obj["status"].(map[string]any)
	var out bytes.Buffer
	for i := range n {
		meta["resourceVersion"] = strconv.Itoa(1000 + i)
		meta["name"] = "mcc-demo-app-cluster-" + strconv.Itoa(i%1000)
		if i%2 == 0 {
			delete(status, "ready")
		} else {
			status["ready"] = true
		}
		ev, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": obj})
		require.NoError(tb, err)
		out.Write(ev)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func BenchmarkDecodeBundleDeploymentEvents(b *testing.B) {
	const events = 1000
	stream := weightStream(b, events)
	perEvent := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*events), "µs/event")
	}
	b.Run("scanner", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			t := newTally()
			d := &bdWatchDecoder{s: newJSONStream(bytes.NewReader(stream))}
			for {
				ev, err := d.next()
				if err == io.EOF {
					break
				}
				require.NoError(b, err)
				t.put(ev.Item.key(), verdictOf(ev.Item.BD))
			}
		}
		perEvent(b)
	})
	b.Run("narrow", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			t := newTally()
			d := json.NewDecoder(bytes.NewReader(stream))
			for {
				var ev struct {
					Type   string   `json:"type"`
					Object narrowBD `json:"object"`
				}
				err := d.Decode(&ev)
				if err == io.EOF {
					break
				}
				var typeErr *json.UnmarshalTypeError
				if err != nil && !errors.As(err, &typeErr) {
					require.NoError(b, err)
				}
				bd := ev.Object.bundleDeployment()
				t.put(bd.Namespace+"/"+bd.Name, verdictOf(bd))
			}
		}
		perEvent(b)
	})
	b.Run("unstructured", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		b.ReportAllocs()
		for b.Loop() {
			t := newTally()
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
				bd := ParseBundleDeployment(&unstructured.Unstructured{Object: ev.Object})
				t.put(bd.Namespace+"/"+bd.Name, verdictOf(bd))
			}
		}
		perEvent(b)
	})
}
