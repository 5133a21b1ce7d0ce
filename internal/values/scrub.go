package values

import (
	"fmt"
	"sort"
	"strings"
)

// minSecretLen is the shortest secret value Scrub replaces: shorter ones
// ("", "1", "no") would blank out unrelated words.
const minSecretLen = 4

// SecretStrings returns the text of every scalar value under a
// secret-looking key in v (see the redaction rules), longest first.
func SecretStrings(v map[string]any) []string {
	var out []string
	var walk func(v any, secret bool)
	walk = func(v any, secret bool) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(e, secret || isSecretKey(k))
			}
		case []any:
			for _, e := range x {
				walk(e, secret)
			}
		case nil:
		default:
			if s := fmt.Sprint(x); secret && len(s) >= minSecretLen {
				out = append(out, s)
			}
		}
	}
	walk(v, false)
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// Scrub returns err with every occurrence of the secrets in its message
// replaced by the redaction mark; errors.Is and errors.As still see the
// original chain.
func Scrub(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, Redaction)
	}
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// LeafPaths lists the formatted paths of the leaves of v (lists and empty
// maps are leaves), sorted: what an override sets, without its values.
func LeafPaths(v map[string]any) []string {
	var out []string
	var walk func(keys []string, v any)
	walk = func(keys []string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, e := range m {
				walk(append(append([]string(nil), keys...), k), e)
			}
			return
		}
		out = append(out, FormatPath(keys))
	}
	for k, e := range v {
		walk([]string{k}, e)
	}
	sort.Strings(out)
	return out
}
