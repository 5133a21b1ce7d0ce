package provenance

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWordsOf(t *testing.T) {
	require.Equal(t, []string{"extra", "args"}, wordsOf("extraArgs"))
	require.Equal(t, []string{"enable", "ssl", "passthrough", "true"}, wordsOf("--enable-ssl-passthrough=true"))
	require.Equal(t, []string{"service", "ipfamilies"}, wordsOf("serviceIPFamilies")) // an acronym stays one word
	require.True(t, alike("arg", "arguments"))
	require.False(t, alike("io", "ion"), "two letters are no word")
}

// A live value covers a render when it holds each of its keys and
// elements, in order.
func TestRenders(t *testing.T) {
	port := func(name string, n int) map[string]any { return map[string]any{"name": name, "port": n} }
	withProtocol := func(m map[string]any) map[string]any { m["protocol"] = "TCP"; return m }
	require.True(t, renders([]any{port("http", 80), port("metrics", 9100)},
		[]any{withProtocol(port("http", 80)), withProtocol(port("metrics", 9100))}), "the API server's defaults aside")
	require.False(t, renders([]any{port("http", 80), port("metrics", 9100)}, []any{port("metrics", 9100), port("http", 80)}),
		"another order is another list (env's order decides what $(VAR) reads)")
	require.False(t, renders([]any{port("http", 80)}, []any{port("http", 80), port("metrics", 9100)}), "an element the render lacks")
	require.False(t, renders([]any{port("http", 80), port("metrics", 9100)}, []any{port("http", 80), port("metrics", 9200)}))
	require.False(t, renders(map[string]any{"a": "1", "b": "2"}, map[string]any{"a": "1"}), "a key the live value lacks")
	require.True(t, renders([]any{"--a", "--b"}, []any{"--a", "--b"}))
}

// A candidate's holes are filled by what its trace read back: a key, its
// value, a list's new element; a hole left makes no answer.
func TestWithCandidateFillsItsHoles(t *testing.T) {
	m := &Map{values: map[string]any{"extraArgs": map[string]any{}, "more": []any{"--a"}}, marks: &Marks{}}
	c := candidate{at: []Step{"extraArgs"}, value: map[string]any{holeKeyOf(0): hole}}
	got, ok := m.withCandidate(c, []Assignment{
		{At: []Step{"extraArgs", KeyOf(holeKeyOf(0))}, Value: "v"},
		{At: []Step{"extraArgs", holeKeyOf(0)}, Value: "3"},
	})
	require.True(t, ok)
	require.Equal(t, map[string]any{"v": "3"}, got[0].Value)
	require.True(t, got[0].Changed)
	_, ok = m.withCandidate(c, nil)
	require.False(t, ok, "the key and its value were not read back: they would be made up")

	c = candidate{at: []Step{"more"}, value: []any{"--a", hole}}
	got, ok = m.withCandidate(c, []Assignment{{At: []Step{"more", 1}, Value: "--b"}})
	require.True(t, ok)
	require.Equal(t, []any{"--a", "--b"}, got[0].Value)
}

// A Secret's key whose value is the whole decoded value is offered as
// --set-file reading the live Secret; the value is never in the flag.
func TestSecretSetFileReadsTheLiveSecret(t *testing.T) {
	live := base64.StdEncoding.EncodeToString([]byte("Pa55-word"))
	r := Reading{Adopt: []Adopted{{Keys: []string{"auth", "password"}, Value: "Pa55-word"}}}
	flag, ok := secretSetFile(r, ObjectID{Kind: "Secret", Namespace: "demo", Name: "web-auth"}, []Step{"data", "tls.key"}, live)
	require.True(t, ok)
	require.Equal(t, `--set-file auth.password=<(kubectl get secret -n demo web-auth -o jsonpath='{.data.tls\.key}' | base64 -d)`, flag)
	require.NotContains(t, flag, "Pa55")
	r.Adopt[0].Value = "Pa55" // a part of the key: no file holds it
	_, ok = secretSetFile(r, ObjectID{Kind: "Secret", Name: "web-auth"}, []Step{"data", "tls.key"}, live)
	require.False(t, ok)
	_, ok = secretSetFile(r, ObjectID{Kind: "ConfigMap", Name: "web"}, []Step{"data", "password"}, live)
	require.False(t, ok, "not a Secret")
}
