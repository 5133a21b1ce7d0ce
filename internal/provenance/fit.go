package provenance

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// fit splits a live string along the literal text of the template; of
// several splits, the one that changes the fewest values. real is the
// field as the chart renders it now: a piece of the live string that is
// the piece real has there keeps its value as it is (a protocol the
// template lowers reads back `tcp`; the value stays `TCP`).
func (m *Map) fit(parts []part, real, live any, liveSet bool, note string) Source {
	src := Source{Note: note}
	if !liveSet {
		for _, p := range parts {
			if p.mark >= 0 {
				src.Assignments = append(src.Assignments, m.assign(m.marks.at[p.mark], nil, false))
			}
		}
		return src
	}
	// the pieces real splits into (none when it does not: each piece is
	// then compared with its value's text)
	was, _ := m.split(parts, fieldText(real), nil)
	best, ok := m.split(parts, fieldText(live), was)
	if !ok {
		return Source{Reason: ReasonNoFit + " (" + literals(parts) + ")", Note: note}
	}
	i := 0
	for _, p := range parts {
		if p.mark < 0 {
			continue
		}
		v := coerce(best[i], m.marks.orig[p.mark])
		if was != nil && best[i] == was[i] {
			v = m.marks.orig[p.mark]
		}
		src.Assignments = append(src.Assignments, m.assign(m.marks.at[p.mark], v, true))
		i++
	}
	return src
}

// fieldText is a field's value as fit splits it: a string as it is, any
// other value as JSON.
func fieldText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// split is the way s splits along parts that changes the fewest values:
// a piece changes its value when it is not the piece of was there (was
// nil: when it is not its value's text).
func (m *Map) split(parts []part, s string, was []string) ([]string, bool) {
	var best []string
	bestChanged := -1
	matchParts(parts, s, nil, func(pieces []string) bool {
		changed, i := 0, 0
		for _, p := range parts {
			if p.mark < 0 {
				continue
			}
			switch {
			case was != nil:
				if pieces[i] != was[i] {
					changed++
				}
			case text(coerce(pieces[i], m.marks.orig[p.mark])) != text(m.marks.orig[p.mark]):
				changed++
			}
			i++
		}
		if bestChanged < 0 || changed < bestChanged {
			best, bestChanged = append([]string(nil), pieces...), changed
		}
		return changed > 0
	})
	return best, best != nil
}

// part is a literal text (mark -1) or a marker.
type part struct {
	lit  string
	mark int
}

func split(s string) []part {
	var out []part
	last := 0
	for _, loc := range markerRE.FindAllStringSubmatchIndex(s, -1) {
		if loc[0] > last {
			out = append(out, part{lit: s[last:loc[0]], mark: -1})
		}
		n, _ := strconv.Atoi(s[loc[2]:loc[3]])
		out = append(out, part{mark: n})
		last = loc[1]
	}
	if last < len(s) {
		out = append(out, part{lit: s[last:], mark: -1})
	}
	return out
}

func hasMark(parts []part) bool {
	for _, p := range parts {
		if p.mark >= 0 {
			return true
		}
	}
	return false
}

func literals(parts []part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.mark >= 0 {
			b.WriteString("…")
		} else {
			b.WriteString(strconv.Quote(p.lit))
		}
	}
	return b.String()
}

// maxSplits bounds the splits tried of one live string.
const maxSplits = 256

// matchParts calls found with each way s splits along parts (the pieces
// the markers take), until found returns false or maxSplits were tried.
func matchParts(parts []part, s string, pieces []string, found func([]string) bool) {
	tries := 0
	var walk func(i int, s string, pieces []string) bool
	walk = func(i int, s string, pieces []string) bool {
		if i == len(parts) {
			if s != "" {
				return true
			}
			tries++
			return found(pieces) && tries < maxSplits
		}
		p := parts[i]
		if p.mark < 0 {
			if !strings.HasPrefix(s, p.lit) {
				return true
			}
			return walk(i+1, s[len(p.lit):], pieces)
		}
		if i+1 == len(parts) {
			return walk(i+1, "", append(pieces, s))
		}
		for end := 0; end <= len(s); end++ {
			if next := parts[i+1]; next.mark < 0 && !strings.HasPrefix(s[end:], next.lit) {
				continue
			}
			if !walk(i+1, s[end:], append(pieces[:len(pieces):len(pieces)], s[:end])) {
				return false
			}
		}
		return true
	}
	walk(0, s, pieces)
}

// text is a value as a template prints it.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(values.Normalize(v))
}

// coerce reads piece as the type of the value it replaces: a number stays
// a number when it reads as one; a string that toYaml quoted (`"true"`,
// `'%(protocol)s'`: text YAML would read as another type or that starts
// with a special character) is read unquoted, as toYaml will quote it
// again.
func coerce(piece string, orig any) any {
	switch orig.(type) {
	case string:
		if n := len(piece); n >= 2 && (piece[0] == '"' && piece[n-1] == '"' || piece[0] == '\'' && piece[n-1] == '\'') {
			var s string
			if err := yaml.Unmarshal([]byte(piece), &s); err == nil {
				return s
			}
		}
		return piece
	case nil, bool:
		return piece
	}
	if i, err := strconv.ParseInt(piece, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(piece, 64); err == nil {
		return f
	}
	return piece
}
