package values

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Input is everything one merge decides from.
type Input struct {
	User        map[string]any // U: the target's values today
	OldDefaults map[string]any // Dold: nil when the deployed chart is unknown
	NewDefaults map[string]any // Dnew
	// NewKeys are the keys of the new chart's values, those set to null
	// included (chart.DefaultsAndKeys); a user key it has is no orphan. nil: those of
	// NewDefaults.
	NewKeys     map[string]any
	Rules       []Rule      // first match wins, in this order
	Migrations  []Migration // applied in this order, when their versions match
	Live        LiveObjects // objects live and once rules read
	Overrides   []Override  // explicit user intent, applied after the rules, in order
	FromVersion string      // the deployed version; migrations match on it
	ToVersion   string      // the target version
	// RegeneratedData lists template files of the new chart that generate
	// data on every render (see chart.RegeneratedData); each is a warning.
	RegeneratedData []string
	// Adopt are live values of fields an operator changed in the cluster,
	// in values terms; an adopt rule that decides a path takes its value.
	Adopt []Adoption
}

// Adoption is the value a path must have for the chart to render a field
// as it is live, and where that was seen.
type Adoption struct {
	Keys  []string
	Value any
	// Object, Field and Manager say what was changed, and by whom (for
	// the report); Rendered is what the deployed revision rendered there.
	Object, Field, Manager string
	Rendered               string
	// Secret: the field is a Secret's; its values are never shown.
	Secret bool
}

// Override is one explicit source of values (`--set`, `-f`), merged over the
// result of the rules the way Helm merges value files.
type Override struct {
	Origin string // how the user gave it, e.g. `--set a.b=1` or `-f extra.yaml`
	Values map[string]any
}

// Merge computes the new user values U' and reports every decision.
//
// Order: migrations, then rules, then overrides. Same input, same output,
// byte for byte. A readonly value that a migration or override would change
// refuses the merge: the error wraps outcome.ErrRefused, and the Result is
// still returned so the refusal can be reported. A migration that fails on
// these values is bad input (outcome.ErrBadInput).
func Merge(in Input) (*Result, error) {
	m := &merger{in: &in, hasOld: in.OldDefaults != nil, result: map[string]any{}, secretKeys: map[string]bool{}}

	if err := m.migrate(); err != nil {
		return nil, err
	}
	if err := m.evalLive(); err != nil {
		return nil, err
	}
	for _, o := range in.Overrides {
		m.overTrees = append(m.overTrees, normalize(o.Values).(map[string]any))
	}
	m.overrides = mergeOverrides(m.overTrees)
	m.adoptions()
	m.walk()
	m.noOldChartWarnings()
	keys := in.NewKeys
	if keys == nil {
		keys = in.NewDefaults
	}
	m.orphans(nil, m.result, keys)
	for _, f := range in.RegeneratedData {
		m.warn(WarnRegeneratedData, f, "the template generates data on every render without a lookup guard: each upgrade changes it; consider a once rule")
	}
	sort.SliceStable(m.warnings, func(i, j int) bool {
		a, b := m.warnings[i], m.warnings[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Path < b.Path
	})

	res := &Result{From: in.FromVersion, To: in.ToVersion, Values: m.result,
		Decisions: m.decisions, Warnings: m.warnings}
	if res.Decisions == nil {
		res.Decisions = []Decision{}
	}
	if res.Warnings == nil {
		res.Warnings = []Warning{}
	}
	var err error
	if res.YAML, err = Marshal(m.result); err != nil {
		return nil, err
	}
	res.SHA256 = hashBytes(res.YAML)
	if len(m.refusals) > 0 {
		return res, outcome.Refused(fmt.Errorf("readonly values would change: %s", strings.Join(m.refusals, "; ")))
	}
	return res, nil
}

// trees index the values a walk carries at each path.
const (
	tUser0 = iota // U before migrations
	tUser         // U after migrations
	tOld          // Dold
	tNew          // Dnew
	tOver         // the overrides merged together
	nTrees
)

type merger struct {
	in     *Input
	hasOld bool

	steps     []map[string]any // U0 and the values after each applied migration
	stepNames []string         // the migration that produced steps[i+1]
	live      []liveValue      // per rule; computed for live and once rules
	forced    *trie            // the paths of live and once rules
	overTrees []map[string]any // each override, normalised
	overrides map[string]any   // the overrides merged together

	result    map[string]any
	decisions []Decision
	warnings  []Warning
	refusals  []string
	ruleUsed  []bool
	adopt     map[string]Adoption // by path: what the adopt rules take

	keys       []string        // the path the walk stands on
	stateBufs  []ruleState     // per depth, reused
	secretKeys map[string]bool // isSecretKey, cached
}

type liveValue struct {
	value   Value  // the value the expression gave; unset when missing
	missing string // why there is no value, for the reason and warning
}

func (m *merger) warn(kind WarningKind, path, msg string) {
	m.warnings = append(m.warnings, Warning{Kind: kind, Path: path, Message: msg})
}

// migrate applies the migrations whose version constraints match.
func (m *merger) migrate() error {
	u0, _ := normalize(m.in.User).(map[string]any)
	if u0 == nil {
		u0 = map[string]any{}
	}
	m.steps = []map[string]any{u0}
	if len(m.in.Migrations) == 0 {
		return nil
	}
	from, to := version(m.in.FromVersion), version(m.in.ToVersion)
	cur := u0
	for i, mig := range m.in.Migrations {
		if !mig.Applies(from, to) {
			continue
		}
		out, err := mig.Expr.Eval(cur)
		if err != nil && !errors.Is(err, errNoResult) {
			return outcome.BadInput(fmt.Errorf("migration %d (%s): %w", i+1, mig.Name, err))
		}
		next, ok := out.(map[string]any)
		switch {
		case out == nil:
			next = map[string]any{}
		case !ok:
			return outcome.BadInput(fmt.Errorf("migration %d (%s): the expression gave %s, want the values map", i+1, mig.Name, typeName(out)))
		}
		m.steps = append(m.steps, next)
		m.stepNames = append(m.stepNames, mig.Name)
		cur = next
	}
	return nil
}

func version(s string) *semver.Version {
	v, err := semver.NewVersion(s)
	if err != nil {
		return nil
	}
	return v
}

// evalLive reads the value of every live and once rule from its object.
func (m *merger) evalLive() error {
	m.live = make([]liveValue, len(m.in.Rules))
	m.ruleUsed = make([]bool, len(m.in.Rules))
	m.forced = &trie{}
	for i, r := range m.in.Rules {
		if !r.Policy.needsSource() {
			continue
		}
		m.forced.add(r.Pattern.Keys())
		obj, ok := m.in.Live.Get(*r.Source)
		if !ok {
			m.live[i].missing = fmt.Sprintf("live object %s not found", r.Source)
			continue
		}
		v, err := r.Expr.Eval(obj)
		switch {
		case errors.Is(err, errNoResult):
			m.live[i].missing = fmt.Sprintf("%q gave no value on %s", r.Expr, r.Source)
		case err != nil:
			return outcome.BadInput(fmt.Errorf("rule %d (%s %s): %w", i+1, r.Policy, r.Pattern, err))
		case v == nil:
			m.live[i].missing = fmt.Sprintf("%q is null on %s", r.Expr, r.Source)
		default:
			m.live[i].value = some(v)
		}
	}
	return nil
}

// mergeOverrides merges the override trees in order, the way Helm merges
// value files: maps key by key, anything else replaced.
func mergeOverrides(trees []map[string]any) map[string]any {
	out := map[string]any{}
	for _, t := range trees {
		mergeInto(out, t)
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, sv := range src {
		sm, sok := sv.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			mergeInto(dm, sm)
			continue
		}
		dst[k] = DeepCopy(sv)
	}
}

// overrideOrigin names the last override that sets the path or an ancestor.
func (m *merger) overrideOrigin(keys []string) string {
	origin := ""
	for i, t := range m.overTrees {
		for n := len(keys); n > 0; n-- {
			if _, ok := lookup(t, keys[:n]); ok {
				origin = m.in.Overrides[i].Origin
				break
			}
		}
	}
	return origin
}

// trie holds the paths of live and once rules, which are decided even when
// no values tree has them.
type trie struct {
	children map[string]*trie
	end      bool
}

func (t *trie) add(keys []string) {
	for _, k := range keys {
		if t.children == nil {
			t.children = map[string]*trie{}
		}
		next, ok := t.children[k]
		if !ok {
			next = &trie{}
			t.children[k] = next
		}
		t = next
	}
	t.end = true
}

func (t *trie) child(k string) *trie {
	if t == nil {
		return nil
	}
	return t.children[k]
}
