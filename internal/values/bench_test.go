package values_test

import (
	"fmt"
	"testing"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Targets stated by the project: the Harvester merge < 20 ms, 100k leaves
// < 1 s, and 100k leaves no more than 12× the time of 10k.

func BenchmarkMergeHarvester(b *testing.B) {
	in := harvesterInput(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := values.Merge(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMergeSynthetic(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("leaves=%d", n), func(b *testing.B) {
			in := syntheticInput(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := values.Merge(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSyntheticInput checks the generator the benchmarks rely on.
func TestSyntheticInput(t *testing.T) {
	in := syntheticInput(t, 1000)
	if got := len(leafPaths(in.NewDefaults)); got != 1000 {
		t.Fatalf("%d leaves, want 1000", got)
	}
	if len(in.Rules) != 50 {
		t.Fatalf("%d rules, want 50", len(in.Rules))
	}
	res := mustMerge(t, in)
	if len(res.Decisions) < 200 {
		t.Fatalf("only %d decisions", len(res.Decisions))
	}
	again := mustMerge(t, syntheticInput(t, 1000))
	if res.SHA256 != again.SHA256 {
		t.Fatal("the generator is not deterministic")
	}
}

// synthLeaf is one generated leaf: its path and its kind.
type synthLeaf struct {
	keys []string
	kind int // 0 image.tag, 1 requests.cpu, 2 limits.memory, 3 x, 4 b
}

// synthPath builds leaf i: 2 to 4 levels of shared maps, a component map of
// its own, then a suffix by kind: 4 to 8 keys in all.
func synthPath(i int) synthLeaf {
	levels := 2 + i%3
	keys := make([]string, 0, levels+4)
	for l := 0; l < levels; l++ {
		keys = append(keys, fmt.Sprintf("m%d_%d", l, (i>>(3*l))%8))
	}
	keys = append(keys, fmt.Sprintf("c%d", i))
	kind := (i / 3) % 5
	switch kind {
	case 0:
		keys = append(keys, "image", "tag")
	case 1:
		keys = append(keys, "resources", "requests", "cpu")
	case 2:
		keys = append(keys, "resources", "limits", "memory")
	case 3:
		keys = append(keys, "x")
	default:
		keys = append(keys, "b")
	}
	return synthLeaf{keys: keys, kind: kind}
}

func synthSet(m map[string]any, keys []string, v any) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

// syntheticInput generates n leaves deterministically: the new defaults
// differ from the old on about 10% of them, the user overrides about 20%
// (half of those with the old default, half with a real customisation),
// and 50 rules mix concrete paths, `a.*.b`, `a.**.x` and `**.x` patterns
// with the policies follow, max, keep and chart.
func syntheticInput(tb testing.TB, n int) values.Input {
	tb.Helper()
	user, old, nw := map[string]any{}, map[string]any{}, map[string]any{}
	var concrete []string
	for i := 0; i < n; i++ {
		leaf := synthPath(i)
		var o, d, u any
		switch leaf.kind {
		case 0:
			o, d, u = "v1", "v2", "v1"
			if i%2 == 1 {
				u = "v1-custom"
			}
		case 1:
			o, d, u = "250m", "500m", "100m"
			if i%2 == 1 {
				u = "2"
			}
		case 2:
			o, d, u = "512Mi", "1Gi", "2Gi"
		case 3:
			o, d, u = int64(i), int64(i+1), int64(2*i)
		default:
			o, d, u = fmt.Sprintf("b%d", i), fmt.Sprintf("b%d-new", i), "user"
		}
		synthSet(old, leaf.keys, o)
		if i%10 == 7 {
			synthSet(nw, leaf.keys, d)
		} else {
			synthSet(nw, leaf.keys, o)
		}
		if (i*7919)%5 == 0 {
			synthSet(user, leaf.keys, u)
		}
		if len(concrete) < 20 && i%(n/20+1) == 0 {
			concrete = append(concrete, values.FormatPath(leaf.keys))
		}
	}

	policies := []string{"follow", "max", "keep", "chart"}
	var specs []string
	for i, p := range concrete {
		specs = append(specs, policies[i%4]+":"+p)
	}
	for len(specs) < 20 {
		specs = append(specs, fmt.Sprintf("keep:m0_0.m1_0.c%d.x", 100000+len(specs)))
	}
	for j := 0; j < 4; j++ {
		for k := 0; k < 4; k++ {
			specs = append(specs, fmt.Sprintf("%s:m0_%d.m1_%d.*.b", policies[(j+k)%4], j, k))
		}
	}
	for j := 0; j < 8; j++ {
		specs = append(specs, fmt.Sprintf("%s:m0_%d.**.x", policies[j%4], j))
	}
	specs = append(specs,
		"chart:**.image.repository",
		"keep:**.never",
		"follow:**.image.tag",
		"max:**.resources",
		"keep:**.x",
		"chart:**.b",
	)
	return values.Input{
		User: user, OldDefaults: old, NewDefaults: nw,
		Rules:       rules(tb, specs...),
		FromVersion: "1.0.0", ToVersion: "1.1.0",
	}
}
