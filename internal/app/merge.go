package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/strvals"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// MergeFiles are the inputs of an offline merge, each named as its flag.
type MergeFiles struct {
	Values      string   // --values: the user values U
	Chart       string   // --chart: the new chart (directory or .tgz)
	OldChart    string   // --old-chart: the deployed chart, for Dold
	Policy      string   // --policy: rules and migrations
	Live        string   // --live: Kubernetes objects for live and once rules
	Set         []string // --set: Helm strvals, applied after the rules
	Files       []string // -f: value files, applied after the rules, before --set
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
	return upgrade.Merge(in)
}

func loadOffline(f MergeFiles) (upgrade.MergeInputs, error) {
	var in upgrade.MergeInputs
	if f.Values == "" {
		return in, outcome.BadInput(fmt.Errorf("--values is required"))
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
		data, err := os.ReadFile(f.Live)
		if err != nil {
			return in, outcome.BadInput(fmt.Errorf("--live: %w", err))
		}
		if in.Live, err = values.ParseLive(data); err != nil {
			return in, outcome.BadInput(fmt.Errorf("--live %s: %w", f.Live, err))
		}
	}
	in.Overrides, err = Overrides(f.Files, f.Set)
	return in, err
}

// loadChartFile loads a chart directory or .tgz named by flag.
func loadChartFile(flag, path string) (*upgrade.Chart, error) {
	c, err := chartpkg.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	d, err := describe(c)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return d, nil
}

// Overrides reads -f files, then --set values, in the order Helm applies them.
func Overrides(files, sets []string) ([]values.Override, error) {
	var out []values.Override
	for _, file := range files {
		v, err := readValues("-f", file)
		if err != nil {
			return nil, err
		}
		out = append(out, values.Override{Origin: "-f " + file, Values: v})
	}
	for _, s := range sets {
		v := map[string]any{}
		if err := strvals.ParseInto(s, v); err != nil {
			return nil, outcome.BadInput(setError(s, err))
		}
		if len(v) == 0 {
			// Helm 4's parser drops an item it cannot read (an unclosed
			// index) without an error: an item that sets nothing is a
			// mistake to name, not to ignore
			why := "sets no value (an unclosed [ ?); want KEY=VALUE, as in --set image.tag=v2"
			if strings.HasPrefix(s, "=") {
				why = "sets no value: no key before =; want KEY=VALUE, as in --set image.tag=v2"
			}
			return nil, outcome.BadInput(setError(s, errors.New(why)))
		}
		// the origin names the paths, never the values (they may be secret)
		out = append(out, values.Override{Origin: "--set " + strings.Join(values.LeafPaths(v), ","), Values: values.Normalize(v).(map[string]any)})
	}
	return out, nil
}

// setError names a --set item that does not parse. An item that mentions a
// secret-looking key is named by its first key only, without the parser's
// error, which may quote a piece of the value (a password holding a comma).
func setError(item string, err error) error {
	if !values.LooksSecret(item) {
		return fmt.Errorf("--set %q: %w", item, err)
	}
	key, _, _ := strings.Cut(item, "=")
	return fmt.Errorf("--set %q: not in Helm's --set syntax (values not shown: the item mentions a secret-looking key)", key+"="+values.Redaction)
}

// readValues reads a values file; errors name the flag and the file.
func readValues(flag, path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("%s: %w", flag, err))
	}
	v, err := values.Parse(data)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("%s %s: %w", flag, path, err))
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
