package phase

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/target"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// mergePhase decides the new values (DESIGN §3) with U from the
// ManagedChart, the old defaults from the deployed chart and live objects
// from the cluster, prints the decision table and journals the hash.
type mergePhase struct{}

func (mergePhase) Name() string { return "merge" }

func (mergePhase) Run(ctx context.Context, s *State) error {
	if s.Situation == SituationDone || s.Situation == SituationApplied {
		s.Want, _ = s.MC.AppliedWant()
		return nil
	}
	if s.Merge == nil || s.MergedFrom != mergeKey(s.MC) {
		if err := computeMerge(ctx, s); err != nil {
			return err
		}
	}
	if err := s.Merge.WriteTable(s.Opts.Out); err != nil {
		return err
	}
	s.Opts.Log.Info("merged", "decisions", len(s.Merge.Decisions), "warnings", len(s.Merge.Warnings),
		"values_sha256", s.Merge.SHA256, "no_change", s.NoChange)
	return nil
}

// computeMerge runs the merge on the ManagedChart as last read and checks
// the new chart renders with the result. Refusals wrap outcome.ErrRefused.
func computeMerge(ctx context.Context, s *State) error {
	in := values.Input{User: s.MC.Values, Rules: s.Chart.Rules, Migrations: s.Chart.Migrations,
		FromVersion: s.From, ToVersion: s.To, RegeneratedData: chartpkg.RegeneratedData(s.NewChart)}
	var err error
	if in.NewDefaults, err = chartpkg.Defaults(s.NewChart); err != nil {
		return err
	}
	if s.OldChart != nil {
		if in.OldDefaults, err = chartpkg.Defaults(s.OldChart); err != nil {
			return err
		}
	}
	if in.Live, err = fetchLive(ctx, s, s.Chart.Rules); err != nil {
		return err
	}
	if in.Overrides, err = Overrides(s.Opts.Files, s.Opts.Set); err != nil {
		return err
	}
	res, err := MergeAndCheck(in, s.NewChart)
	if err != nil {
		if res != nil {
			s.Merge = res // for the report of a refusal; never applied
			_ = res.WriteTable(s.Opts.Out)
		}
		return err
	}
	if len(res.Values) == 0 && len(s.MC.Values) > 0 {
		if res, err = keepValuesNonEmpty(res, s.NewChart); err != nil {
			return err
		}
	}
	s.Merge, s.MergeInput, s.MergedFrom = res, in, mergeKey(s.MC)
	s.NoChange = s.MC.Version == s.To && s.MC.ValuesHash() == res.SHA256 && !s.MC.Paused
	s.Want = target.Want{Version: s.To, ValuesHash: res.SHA256}
	if s.NoChange {
		if w, ok := s.MC.AppliedWant(); !ok || w != s.Want {
			// nothing to write, so no annotations to wait for
			s.Want.ValuesHash = ""
		}
	}
	return nil
}

// fetchLive reads the source objects of live and once rules. A missing
// object (or an unknown kind) is left out: the merge reports it.
func fetchLive(ctx context.Context, s *State, rules []values.Rule) (values.LiveObjects, error) {
	live := values.LiveObjects{}
	for _, r := range rules {
		if r.Source == nil {
			continue
		}
		ref := *r.Source
		if _, ok := live.Get(ref); ok {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("live source %s: %w", ref, err)
		}
		mapping, err := s.Env.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
		if meta.IsNoMatchError(err) {
			s.Opts.Log.Warn("live source kind is not served by the cluster", "source", ref.String())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("live source %s: %w", ref, err)
		}
		res := s.Env.Dynamic.Resource(mapping.Resource)
		var u *unstructured.Unstructured
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			u, err = res.Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		} else {
			u, err = res.Get(ctx, ref.Name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading live source %s: %w", ref, err)
		}
		if err := live.Add(u.Object); err != nil {
			return nil, fmt.Errorf("live source %s: %w", ref, err)
		}
	}
	return live, nil
}

// keepValuesNonEmpty writes `global: {}` instead of empty values. Fleet runs
// `helm upgrade` with the values and no reuse or reset flag, and Helm then
// copies the previous release's values when the new ones are empty: the
// pins the merge dropped would all come back. An empty global map renders
// like nothing (Helm adds it anyway), and is not empty.
func keepValuesNonEmpty(res *values.Result, newChart *chart.Chart) (*values.Result, error) {
	out := *res
	out.Values = map[string]any{"global": map[string]any{}}
	var err error
	if out.YAML, err = values.Marshal(out.Values); err != nil {
		return nil, err
	}
	if out.SHA256, err = values.Hash(out.Values); err != nil {
		return nil, err
	}
	if err := chartpkg.Check(newChart, out.Values); err != nil {
		return nil, fmt.Errorf("the merge leaves no user values, and Helm would then reuse the old ones; global: {} does not validate either: %w", err)
	}
	out.Warnings = append(append([]values.Warning(nil), res.Warnings...), values.Warning{Kind: values.WarnPinned, Path: "global",
		Message: "the merge leaves no user values: writing global: {} instead, since Helm (as Fleet runs it) reuses the previous values when given none"})
	return &out, nil
}
