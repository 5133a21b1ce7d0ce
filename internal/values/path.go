package values

import (
	"fmt"
	"strconv"
	"strings"
)

// maxPatternSegments bounds a pattern so its matcher state fits one uint64.
const maxPatternSegments = 63

// segKind is what one segment of a Pattern matches.
type segKind uint8

const (
	segKey    segKind = iota // exactly one key
	segStar                  // `*`: any one key
	segDouble                // `**`: any number of keys, zero included
)

type segment struct {
	kind segKind
	key  string
}

// Pattern is a parsed path pattern: dot-separated keys, `*` for one key, `**`
// for any depth, and `["key.with.dots"]` for a key holding special characters.
type Pattern struct {
	text string
	segs []segment
}

// String returns the pattern as it was written.
func (p Pattern) String() string { return p.text }

// Concrete reports whether the pattern names exactly one path (no wildcard).
func (p Pattern) Concrete() bool {
	for _, s := range p.segs {
		if s.kind != segKey {
			return false
		}
	}
	return true
}

// Keys returns the keys of a concrete pattern; nil when it has wildcards.
func (p Pattern) Keys() []string {
	if !p.Concrete() {
		return nil
	}
	keys := make([]string, len(p.segs))
	for i, s := range p.segs {
		keys[i] = s.key
	}
	return keys
}

// ParsePattern parses a path pattern such as `a.*.image.tag`, `**.resources`
// or `metadata.annotations["storageclass.kubernetes.io/is-default-class"]`.
// The error says what is wrong and where in the text.
func ParsePattern(text string) (Pattern, error) {
	if strings.TrimSpace(text) == "" {
		return Pattern{}, fmt.Errorf("empty path")
	}
	var segs []segment
	i := 0
	expectKey := true // at the start or after a dot a segment must follow
	for i < len(text) {
		c := text[i]
		switch {
		case c == '[':
			key, n, err := parseBracket(text[i:])
			if err != nil {
				return Pattern{}, fmt.Errorf("path %q at offset %d: %w", text, i, err)
			}
			segs = append(segs, segment{kind: segKey, key: key})
			i += n
			expectKey = false
		case c == '.':
			if expectKey {
				return Pattern{}, fmt.Errorf("path %q at offset %d: empty key", text, i)
			}
			i++
			expectKey = true
			if i == len(text) {
				return Pattern{}, fmt.Errorf("path %q: ends with a dot", text)
			}
		default:
			if !expectKey {
				return Pattern{}, fmt.Errorf("path %q at offset %d: a dot or bracket must follow a bracketed key", text, i)
			}
			j := i
			for j < len(text) && text[j] != '.' && text[j] != '[' {
				j++
			}
			word := text[i:j]
			switch {
			case word == "*":
				segs = append(segs, segment{kind: segStar})
			case word == "**":
				segs = append(segs, segment{kind: segDouble})
			case strings.ContainsAny(word, "*]\"' \t\n"):
				return Pattern{}, fmt.Errorf("path %q at offset %d: key %q holds a special character; write it as [%q] (wildcards * and ** must be a whole key)", text, i, word, word)
			default:
				segs = append(segs, segment{kind: segKey, key: word})
			}
			i = j
			expectKey = false
		}
	}
	if len(segs) > maxPatternSegments {
		return Pattern{}, fmt.Errorf("path %q has %d keys, at most %d are allowed", text, len(segs), maxPatternSegments)
	}
	return Pattern{text: text, segs: segs}, nil
}

// parseBracket parses `["key"]` or `['key']` at the start of s and returns the
// key and the number of bytes consumed.
func parseBracket(s string) (string, int, error) {
	if len(s) < 4 || (s[1] != '"' && s[1] != '\'') {
		return "", 0, fmt.Errorf(`a bracket must hold a quoted key, as in ["a.b"]`)
	}
	quote := s[1]
	if quote == '\'' {
		end := strings.IndexByte(s[2:], '\'')
		if end < 0 || 2+end+1 >= len(s) || s[2+end+1] != ']' {
			return "", 0, fmt.Errorf("unterminated bracketed key")
		}
		return s[2 : 2+end], 2 + end + 2, nil
	}
	// a double-quoted key ends at the first unescaped quote
	for j := 2; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			if j+1 >= len(s) || s[j+1] != ']' {
				return "", 0, fmt.Errorf("a bracketed key must be followed by ]")
			}
			key, err := strconv.Unquote(s[1 : j+1])
			if err != nil {
				return "", 0, fmt.Errorf("bad escape in bracketed key %s", s[1:j+1])
			}
			return key, j + 2, nil
		}
	}
	return "", 0, fmt.Errorf("unterminated bracketed key")
}

// FormatPath renders a concrete path the way patterns are written: plain keys
// joined by dots, other keys bracketed (`a.b["c.d"]`). The root is "".
func FormatPath(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if isPlainKey(k) {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
			continue
		}
		b.WriteString("[")
		b.WriteString(strconv.Quote(k))
		b.WriteString("]")
	}
	return b.String()
}

// matchState is the set of pattern positions reached so far, one bit each.
type matchState uint64

func (p Pattern) accept() matchState { return 1 << uint(len(p.segs)) }

// start is the state before any key was read.
func (p Pattern) start() matchState { return p.closure(1) }

// closure adds the positions reachable by letting a `**` match zero keys.
func (p Pattern) closure(s matchState) matchState {
	for i, seg := range p.segs {
		if seg.kind == segDouble && s&(1<<uint(i)) != 0 {
			s |= 1 << uint(i+1)
		}
	}
	return s
}

// step reads one key.
func (p Pattern) step(s matchState, key string) matchState {
	if s == 0 {
		return 0
	}
	var next matchState
	for i, seg := range p.segs {
		if s&(1<<uint(i)) == 0 {
			continue
		}
		switch seg.kind {
		case segKey:
			if seg.key == key {
				next |= 1 << uint(i+1)
			}
		case segStar:
			next |= 1 << uint(i+1)
		case segDouble:
			next |= 1 << uint(i)
		}
	}
	return p.closure(next)
}

// Match reports whether the pattern matches exactly this path.
func (p Pattern) Match(keys []string) bool {
	s := p.start()
	for _, k := range keys {
		if s = p.step(s, k); s == 0 {
			return false
		}
	}
	return s&p.accept() != 0
}

// MatchSelfOrAncestor reports whether the pattern matches the path or one of
// its ancestors (the root included): the rule-selection test of docs/design.md §5.3.
func (p Pattern) MatchSelfOrAncestor(keys []string) bool {
	s := p.start()
	if s&p.accept() != 0 {
		return true
	}
	for _, k := range keys {
		if s = p.step(s, k); s == 0 {
			return false
		}
		if s&p.accept() != 0 {
			return true
		}
	}
	return false
}
