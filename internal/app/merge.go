package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/strvals"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// MergeFiles are the inputs of an offline merge, each named as its flag.
type MergeFiles struct {
	Values      string   // --values: the user values U
	Chart       string   // --chart: the new chart (directory or .tgz)
	OldChart    string   // --old-chart: the deployed chart, for Dold
	Policy      string   // --policy: rules and migrations
	Live        string   // --live: Kubernetes objects for live and once rules
	Explicit    Explicit // -f and the --set family, applied after the rules
	FromVersion string   // --from-version: default the old chart's version
	ToVersion   string   // --to-version: default the new chart's version
}

// MergeOffline reads every input from files and merges through the one
// merge-input path (upgrade.Merge). Bad input of any kind wraps
// outcome.ErrBadInput and names the flag and file; a readonly violation or
// a chart that does not validate or render wraps outcome.ErrRefused, with
// the Result returned for the report when the merge itself ran.
func MergeOffline(_ context.Context, f MergeFiles) (*values.Result, error) {
	in, err := loadOffline(f)
	if err != nil {
		return nil, err
	}
	res, err := upgrade.Merge(in)
	if res != nil {
		for _, r := range in.Rules {
			if r.Policy == values.PolicyAdopt {
				res.Warnings = append(res.Warnings, values.Warning{Kind: values.WarnAdopt, Path: r.Pattern.String(),
					Message: "an offline merge has no cluster to read drift from: the adopt rule decides as user (merge --target adopts)"})
			}
		}
	}
	return res, err
}

func loadOffline(f MergeFiles) (upgrade.MergeInputs, error) {
	var in upgrade.MergeInputs
	if f.Values == "" {
		why := "the user values the target holds today, that the rules decide from (FILE, or - for standard input)"
		if len(f.Explicit.Files) > 0 {
			why += "; the -f files are overrides applied after the rules, as with helm -f, not the current values"
		}
		return in, outcome.BadInput(fmt.Errorf("--values is required: %s", why))
	}
	if f.Chart == "" {
		return in, outcome.BadInput(fmt.Errorf("--chart is required"))
	}
	var err error
	if in.User, err = readValues("--values", f.Values); err != nil {
		return in, err
	}
	if in.New, err = loadChartFile("--chart", f.Chart); err != nil {
		return in, err
	}
	if f.OldChart != "" {
		if in.Old, err = loadChartFile("--old-chart", f.OldChart); err != nil {
			return in, err
		}
	}
	if in.FromVersion, err = versionFlag("--from-version", f.FromVersion); err != nil {
		return in, err
	}
	if in.ToVersion, err = versionFlag("--to-version", f.ToVersion); err != nil {
		return in, err
	}
	if f.Policy != "" {
		p, err := spec.LoadPolicy(f.Policy)
		if err != nil {
			return in, fmt.Errorf("--policy: %w", err)
		}
		in.Rules, in.Migrations = p.Rules, p.Migrations
	}
	if f.Live != "" {
		data, err := yamlfile.Read(f.Live, "--live")
		if err != nil {
			return in, err
		}
		if in.Live, err = values.ParseLive(data); err != nil {
			return in, outcome.BadInput(fmt.Errorf("--live %s: %w", yamlfile.Name(f.Live), err))
		}
	}
	in.Overrides, err = Overrides(f.Explicit)
	return in, err
}

// loadChartFile loads a chart directory or .tgz named by flag.
func loadChartFile(flag, path string) (*upgrade.Chart, error) {
	c, err := chartpkg.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	d, err := describe(c, chartpkg.Renderer{}) // offline: no cluster
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return d, nil
}

// Explicit are the explicit values of one run, as Helm's flags give them.
// They are applied after the rules, each flag family in Helm's order: -f,
// --set-json, --set, --set-string, --set-file, --set-literal.
type Explicit struct {
	Files   []string // -f: values files ("-": standard input)
	JSON    []string // --set-json: KEY=JSON, or a whole JSON object
	Set     []string // --set: Helm strvals, types inferred
	String  []string // --set-string: Helm strvals, every value a string
	File    []string // --set-file: KEY=FILE, the file's content as a string
	Literal []string // --set-literal: KEY=VALUE, the value taken as is
}

// Empty reports whether no explicit value was given.
func (e Explicit) Empty() bool {
	return len(e.Files)+len(e.JSON)+len(e.Set)+len(e.String)+len(e.File)+len(e.Literal) == 0
}

// setParser is one --set flag of Helm: its name and Helm's own parser.
type setParser struct {
	flag  string
	items []string
	parse func(item string, into map[string]any) error
}

// Overrides reads the explicit values, in the order Helm applies them. Each
// item is its own override (so the report names where a value came from);
// every one is parsed by Helm's strvals, as `helm upgrade` parses it.
func Overrides(e Explicit) ([]values.Override, error) {
	var out []values.Override
	for _, file := range e.Files {
		v, err := readValues("-f", file)
		if err != nil {
			return nil, err
		}
		out = append(out, values.Override{Origin: "-f " + yamlfile.Name(file), Values: v})
	}
	readFile := func(rs []rune) (any, error) {
		data, err := yamlfile.Read(string(rs), "--set-file")
		return string(data), err
	}
	for _, p := range []setParser{
		{"--set-json", e.JSON, setJSON},
		{"--set", e.Set, strvals.ParseInto},
		{"--set-string", e.String, strvals.ParseIntoString},
		{"--set-file", e.File, func(s string, v map[string]any) error { return strvals.ParseIntoFile(s, v, readFile) }},
		{"--set-literal", e.Literal, strvals.ParseLiteralInto},
	} {
		for _, s := range p.items {
			v := map[string]any{}
			if err := p.parse(s, v); err != nil {
				if errors.Is(err, outcome.ErrBadInput) {
					return nil, err // a --set-file that cannot be read names its file
				}
				return nil, outcome.BadInput(setError(p.flag, s, err))
			}
			if len(v) == 0 {
				// Helm 4's parser drops an item it cannot read (an unclosed
				// index) without an error: an item that sets nothing is a
				// mistake to name, not to ignore
				why := fmt.Sprintf("sets no value (an unclosed [ ?); want KEY=VALUE, as in %s image.tag=v2", p.flag)
				if strings.HasPrefix(s, "=") {
					why = fmt.Sprintf("sets no value: no key before =; want KEY=VALUE, as in %s image.tag=v2", p.flag)
				}
				return nil, outcome.BadInput(setError(p.flag, s, errors.New(why)))
			}
			// the origin names the paths, never the values (they may be secret)
			out = append(out, values.Override{Origin: p.flag + " " + strings.Join(values.LeafPaths(v), ","), Values: values.Normalize(v).(map[string]any)})
		}
	}
	return out, nil
}

// setJSON parses a --set-json item as Helm does: a whole JSON object, or
// KEY=JSON.
func setJSON(item string, into map[string]any) error {
	trimmed := strings.TrimSpace(item)
	if !strings.HasPrefix(trimmed, "{") {
		return strvals.ParseJSON(item, into)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(trimmed), &obj); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	maps.Copy(into, obj)
	return nil
}

// setError names an item of a --set flag that does not parse. An item that
// mentions a secret-looking key is named by its first key only, without the
// parser's error, which may quote a piece of the value (a password holding a
// comma).
func setError(flag, item string, err error) error {
	if !values.LooksSecret(item) {
		return fmt.Errorf("%s %q: %w", flag, item, err)
	}
	key, _, _ := strings.Cut(item, "=")
	return fmt.Errorf("%s %q: not in Helm's %s syntax (values not shown: the item mentions a secret-looking key)", flag, key+"="+values.Redaction, flag)
}

// readValues reads a values file ("-": standard input); errors name the
// flag and the file.
func readValues(flag, path string) (map[string]any, error) {
	data, err := yamlfile.Read(path, flag)
	if err != nil {
		return nil, err
	}
	v, err := values.Parse(data)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("%s %s: %w", flag, yamlfile.Name(path), err))
	}
	return v, nil
}

// versionFlag returns the flag's version when given (it must be semver).
func versionFlag(flag, given string) (string, error) {
	if given == "" {
		return "", nil
	}
	if _, err := semver.NewVersion(given); err != nil {
		return "", outcome.BadInput(fmt.Errorf("%s %q: not a semantic version: %w", flag, given, err))
	}
	return given, nil
}
