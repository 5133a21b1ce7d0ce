package values_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// FuzzParsePattern: no panic; an accepted pattern keeps its text; a concrete
// one matches its own keys, and FormatPath of its keys parses back to them.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{
		"a", "a.b.c", "*", "**", "a.*.b", "**.image.tag", "promote.**", "a.**.b",
		`metadata.annotations["storageclass.kubernetes.io/is-default-class"]`,
		`["a.b"]`, `['a.b'].c`, `a["b"]["c"]`, `[""]`, `["*"]`, `["\u00e9\n"]`, `["a\"b"]`,
		"kube-vip.config", "a..b", ".a", "a.", "a*b", `a["b`, `["a"]b`, "", " ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := values.ParsePattern(text)
		if err != nil {
			return
		}
		if p.String() != text {
			t.Fatalf("String() = %q, want %q", p.String(), text)
		}
		// matching any path must not panic
		probe := []string{"a", "b", "*", "**", "", "a.b"}
		p.Match(probe)
		p.MatchSelfOrAncestor(probe)
		if !p.Concrete() {
			if p.Keys() != nil {
				t.Fatalf("Keys() of a wildcard pattern %q = %q, want nil", text, p.Keys())
			}
			return
		}
		keys := p.Keys()
		if len(keys) == 0 {
			t.Fatalf("accepted concrete pattern %q has no keys", text)
		}
		if !p.Match(keys) || !p.MatchSelfOrAncestor(keys) {
			t.Fatalf("pattern %q does not match its own keys %q", text, keys)
		}
		formatted := values.FormatPath(keys)
		back, err := values.ParsePattern(formatted)
		if err != nil {
			t.Fatalf("FormatPath(%q) = %q does not parse: %v", keys, formatted, err)
		}
		if !equalStrings(back.Keys(), keys) {
			t.Fatalf("FormatPath(%q) = %q parses to %q", keys, formatted, back.Keys())
		}
		if values.FormatPath(back.Keys()) != formatted {
			t.Fatalf("FormatPath is not stable for %q", keys)
		}
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var fuzzLiveRef = values.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm"}

// fuzzInput builds a merge from fuzzed text; ok is false when the text is
// not a valid input (which is not what this fuzzer tests).
func fuzzInput(t *testing.T, user, old, nw, over, pattern, policy string, hasOld bool) (values.Input, bool) {
	const maxDoc = 4096
	for _, s := range []string{user, old, nw, over} {
		if len(s) > maxDoc {
			return values.Input{}, false
		}
	}
	parse := func(s string) (map[string]any, bool) {
		m, err := values.Parse([]byte(s))
		return m, err == nil
	}
	var in values.Input
	var ok bool
	if in.User, ok = parse(user); !ok {
		return in, false
	}
	if in.NewDefaults, ok = parse(nw); !ok {
		return in, false
	}
	if hasOld {
		if in.OldDefaults, ok = parse(old); !ok {
			return in, false
		}
	}
	if over != "" {
		o, ok := parse(over)
		if !ok {
			return in, false
		}
		in.Overrides = []values.Override{{Origin: "-f fuzz.yaml", Values: o}}
	}
	if pattern != "" {
		p, err := values.ParsePattern(pattern)
		if err != nil {
			return in, false
		}
		pol, err := values.ParsePolicy(policy)
		if err != nil {
			return in, false
		}
		var r values.Rule
		if pol == values.PolicyLive || pol == values.PolicyOnce {
			if !p.Concrete() {
				return in, false
			}
			e, err := values.ParseExpr(".data.v")
			if err != nil {
				t.Fatal(err)
			}
			ref := fuzzLiveRef
			r, err = values.NewRule(p, pol, &ref, e)
			if err != nil {
				t.Fatal(err)
			}
			in.Live = values.LiveObjects{fuzzLiveRef: {"data": map[string]any{"v": "live"}}}
		} else if r, err = values.NewRule(p, pol, nil, nil); err != nil {
			t.Fatal(err)
		}
		in.Rules = []values.Rule{r}
	}
	in.FromVersion, in.ToVersion = "1.0.0", "1.1.0"
	return in, true
}

// FuzzMerge: random small documents for U, Dold, Dnew and an override, one
// rule. The merge does not panic, fails only by a readonly refusal, is
// deterministic, hashes its YAML, and U' holds no value that came from
// neither U nor the override unless a decision pinned it or read it live.
func FuzzMerge(f *testing.F) {
	seeds := []struct {
		user, old, nw, over, pattern, policy string
		hasOld                               bool
	}{
		{`{image: {tag: v1}}`, `{image: {tag: v1}}`, `{image: {tag: v2}}`, ``, `**.image.tag`, `follow`, true},
		{`{image: {tag: v1}}`, ``, `{image: {tag: v2}}`, ``, `**.image.tag`, `follow`, false},
		{`{}`, `{s: {maxSurge: 2}}`, `{s: {maxSurge: 1}}`, ``, `s`, `keep`, true},
		{`{p: {dns: 1}}`, `{}`, `{}`, `{p: {dns: 2}}`, `p.**`, `readonly`, true},
		{`{r: {cpu: 100m, memory: 1Gi}}`, `{r: {cpu: 1}}`, `{r: {cpu: 500m, memory: 512Mi}}`, ``, `r`, `max`, true},
		{`{r: {cpu: 100m}}`, `{}`, `{r: {cpu: 1}}`, ``, `*.cpu`, `min`, true},
		{`{a: {b: 1}}`, `{}`, `{}`, ``, `a.b`, `live`, true},
		{`{}`, `{}`, `{}`, ``, `x.y`, `once`, true},
		{`{a: 1, b: [1, 2]}`, `{a: 1}`, `{a: 2}`, ``, `a`, `remove`, true},
		{`{a: null}`, `{a: {b: 1}}`, `{a: 1}`, `{a: {c: 1}}`, `**`, `chart`, true},
		{`{"a.b": {c: 1}}`, `{}`, `{"a.b": {c: 2}}`, ``, `["a.b"].c`, `user`, true},
		{`{a: {}}`, `{a: {x: 1}}`, `{a: {}}`, `{}`, ``, ``, true},
		{`{n: .nan, i: .inf, big: 1e400, f: 1.5}`, `{}`, `{}`, ``, ``, ``, false},
		{`{a: {b: {c: {d: {e: {f: 1}}}}}}`, `{a: {b: {c: {d: {e: {f: 1}}}}}}`, `{a: {b: {c: {d: {e: {f: 2}}}}}}`, ``, `a.**.f`, `follow`, true},
	}
	for _, s := range seeds {
		f.Add(s.user, s.old, s.nw, s.over, s.pattern, s.policy, s.hasOld)
	}
	f.Fuzz(func(t *testing.T, user, old, nw, over, pattern, policy string, hasOld bool) {
		in, ok := fuzzInput(t, user, old, nw, over, pattern, policy, hasOld)
		if !ok {
			return
		}
		res, err := values.Merge(in)
		if err != nil && !errors.Is(err, outcome.ErrRefused) {
			t.Fatalf("merge failed: %v", err)
		}
		if res == nil {
			t.Fatalf("no result (err %v)", err)
		}
		in2, _ := fuzzInput(t, user, old, nw, over, pattern, policy, hasOld)
		res2, err2 := values.Merge(in2)
		if (err == nil) != (err2 == nil) || res2 == nil {
			t.Fatalf("not deterministic: %v, then %v", err, err2)
		}
		if !bytes.Equal(res.YAML, res2.YAML) || res.SHA256 != res2.SHA256 {
			t.Fatalf("not deterministic:\n%s\n---\n%s", res.YAML, res2.YAML)
		}
		var t1, t2 bytes.Buffer
		if err := res.WriteTable(&t1); err != nil {
			t.Fatal(err)
		}
		_ = res2.WriteTable(&t2)
		if t1.String() != t2.String() {
			t.Fatalf("report not deterministic:\n%s\n---\n%s", t1.String(), t2.String())
		}
		sum := sha256.Sum256(res.YAML)
		if hex.EncodeToString(sum[:]) != res.SHA256 {
			t.Fatalf("SHA256 is not the hash of the YAML")
		}

		// the YAML reads back as the values
		back, err := values.Parse(res.YAML)
		if err != nil {
			t.Fatalf("U' YAML does not parse: %v\n%s", err, res.YAML)
		}
		if y, _ := values.Marshal(back); !bytes.Equal(y, res.YAML) {
			t.Fatalf("U' YAML does not read back the same:\n%s\n---\n%s", res.YAML, y)
		}

		// every leaf of U' comes from U, the override, a pin or a live value
		var overVals map[string]any
		if len(in.Overrides) > 0 {
			overVals = in.Overrides[0].Values
		}
		for _, keys := range leafPaths(res.Values) {
			if _, ok := lookupKeys(in.User, keys); ok {
				continue
			}
			if overVals != nil {
				if _, ok := lookupKeys(overVals, keys); ok {
					continue
				}
			}
			if !pinnedOrLive(res, keys) {
				t.Fatalf("U' has %s, which is in neither U nor the override and was not pinned or read live\nU' =\n%s",
					values.FormatPath(keys), res.YAML)
			}
		}
	})
}

// pinnedOrLive reports whether a decision at the path or an ancestor pinned
// an old default or wrote a live value.
func pinnedOrLive(res *values.Result, keys []string) bool {
	for n := len(keys); n > 0; n-- {
		p := values.FormatPath(keys[:n])
		for _, d := range res.Decisions {
			if d.Path == p && (d.Action == values.ActionPin || d.Action == values.ActionSet) {
				return true
			}
		}
	}
	return false
}

// TestFuzzHelpersRejectBadInput keeps fuzzInput honest about what it skips.
func TestFuzzHelpersRejectBadInput(t *testing.T) {
	_, ok := fuzzInput(t, "[1, 2]", "", "", "", "", "", false)
	if ok {
		t.Fatal("a list is not a values document")
	}
	_, ok = fuzzInput(t, "{}", "", "{}", "", "a.*", "live", false)
	if ok {
		t.Fatal("live needs a concrete path")
	}
	_, ok = fuzzInput(t, strings.Repeat("a", 5000), "", "", "", "", "", false)
	if ok {
		t.Fatal("oversized documents are skipped")
	}
}
