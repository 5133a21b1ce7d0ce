package helmchart

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"strconv"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Target is the upgrade.Target of one HelmChart.
type Target struct {
	c               *Client
	namespace, name string
	opts            Options
	apply           kind.Apply
	specobject.BackupStore
}

// New returns the target port of HelmChart namespace/name, with the
// spec's options.
func New(c *Client, namespace, name string, o Options) *Target {
	backupValues := func(b *specobject.Backup) (map[string]any, error) {
		h, err := ParseHelmChart(specObject(namespace, name, b.Spec))
		if err != nil {
			return nil, err
		}
		return UserValues(h)
	}
	return &Target{c: c, namespace: namespace, name: name, opts: o, apply: kind.DefaultApply,
		BackupStore: specobject.BackupStore{Kube: c.Kube, Kind: Descriptor, Namespace: namespace, Name: name, Values: backupValues}}
}

var _ upgrade.Target = (*Target)(nil)

// Ref names it as helmchart/NAMESPACE/NAME.
func (t *Target) Ref() upgrade.Ref {
	return upgrade.Ref{Kind: Kind, Namespace: t.namespace, Name: t.name}
}

// read is one read of a HelmChart, its HelmChartConfig and the newest
// revision of its release: the adapter's Observed.Source.
type read struct {
	chart   *HelmChart
	config  *HelmChartConfig // nil when there is none
	release *release.Release // nil when there is none
}

// Read reads the HelmChart, its HelmChartConfig and the valuesSecrets they
// name (the overlay), and its release's newest revision; nil when the
// HelmChart does not exist.
func (t *Target) Read(ctx context.Context) (*upgrade.Observed, error) {
	h, err := t.c.Get(ctx, t.namespace, t.name)
	if err != nil || h == nil {
		return nil, err
	}
	rel, err := t.c.NewestRelease(ctx, h)
	if err != nil {
		return nil, err
	}
	o, err := observe(h, rel)
	if err != nil {
		return nil, err
	}
	cfg, err := t.c.Config(ctx, h.Namespace, h.Name)
	if err != nil {
		return nil, err
	}
	o.Source.(*read).config = cfg
	if o.Overlay, o.OverlayFrom, err = t.c.Overlay(ctx, h, cfg); err != nil {
		return nil, err
	}
	return o, nil
}

// observe is the HelmChart as the core sees it. The chart is spec.chart,
// or the name in spec.chartContent; the version is spec.version, else the
// one in spec.chartContent, else the one the release deploys (a HelmChart
// without a version installs the newest).
func observe(h *HelmChart, rel *release.Release) (*upgrade.Observed, error) {
	u, err := UserValues(h)
	if err != nil {
		return nil, err
	}
	o := h.observed(u)
	if o.ValuesHash, err = values.Hash(u); err != nil {
		return nil, err
	}
	if h.ChartContent != "" {
		ch, err := ChartOf(h)
		if err != nil {
			return nil, err
		}
		o.Chart = ch.Name()
		if o.Version == "" {
			o.Version = ch.Metadata.Version
		}
	}
	if o.Version == "" && rel != nil && rel.Chart != nil && rel.Chart.Metadata != nil {
		o.Version = rel.Chart.Metadata.Version
	}
	o.Source = &read{chart: h, release: rel}
	return o, nil
}

// observed is the part of Observed the HelmChart itself gives; u is its
// user values (nil: not worked out, readiness reads only the hash).
func (h *HelmChart) observed(u map[string]any) *upgrade.Observed {
	o := &upgrade.Observed{Chart: h.Chart, Version: h.Version, Values: u, UID: h.UID,
		Applied: specobject.Record(h.Annotations), Source: &read{chart: h}}
	if u == nil {
		if all, err := UserValues(h); err == nil {
			o.ValuesHash, _ = values.Hash(all)
		}
	}
	return o
}

// Health is what preflight refuses on (see Health), and the failure
// policy the upgrade would run under (CheckFailurePolicy).
func (t *Target) Health(ctx context.Context, o *upgrade.Observed) (upgrade.Health, error) {
	r := o.Source.(*read)
	v, err := t.view(ctx, r)
	if err != nil {
		return upgrade.Health{}, err
	}
	var out upgrade.Health
	if problems := Health(v); len(problems) > 0 {
		out.Problems = append(out.Problems, "the helmchart is not healthy; fix it before upgrading:\n  "+joinLines(problems))
	}
	fp := CheckFailurePolicy(r.chart, r.config, t.opts)
	if fp.Problem != "" {
		out.Problems = append(out.Problems, fp.Problem)
	}
	if w, problem := StuckRelease(v.Release, JobRunning(v.Job), NextPolicy(r.chart, r.config, t.opts)); problem != "" {
		out.Problems = append(out.Problems, problem)
	} else if w != nil {
		out.Warnings = append(out.Warnings, *w)
	}
	if fp.Warning != nil {
		out.Warnings = append(out.Warnings, *fp.Warning)
	}
	out.Notes = append(out.Notes, fp.Note)
	return out, nil
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

// view reads everything readiness and health follow, for the HelmChart
// as r read it.
func (t *Target) view(ctx context.Context, r *read) (View, error) {
	v := View{Chart: r.chart, Release: ReleaseOf(r.release)}
	var err error
	if v.Secret, err = t.c.ValuesSecret(ctx, r.chart); err != nil {
		return View{}, err
	}
	if v.Job, err = t.c.Job(ctx, r.chart); err != nil {
		return View{}, err
	}
	if v.PodFailures, v.PodMessage, err = t.c.PodFailures(ctx, v.Job); err != nil {
		return View{}, err
	}
	if r.release != nil {
		if v.Resources, err = t.c.Releases().Look(ctx, r.release); err != nil {
			return View{}, err
		}
	}
	return v, nil
}

// Apply writes spec.version, spec.valuesContent and spec.set (and, for a
// HelmChart that carries its chart, spec.chartContent), or for a restore
// the whole backed-up spec, with the record annotations and the release
// revision it read, at the resourceVersion o was read at: a concurrent
// change fails it with upgrade.ErrConflict.
func (t *Target) Apply(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (*upgrade.Observed, error) {
	r := o.Source.(*read)
	h := r.chart
	revision := "0"
	if r.release != nil {
		revision = strconv.Itoa(r.release.Version)
	}
	ann := specobject.RecordAnnotations(c.Record)
	ann[AnnotationReleaseRevision] = revision
	policy := toWrite(t.opts, c.Restore != nil)
	if _, ok := h.Annotations[AnnotationFailurePolicyBefore]; !ok && policy != "" && policy != h.FailurePolicy {
		before := h.FailurePolicy
		if before == "" {
			before = "unset"
		}
		ann[AnnotationFailurePolicyBefore] = before
	}
	annotate := func(a map[string]string) map[string]string { return specobject.Annotate(a, ann) }
	var up Update
	if c.Restore != nil {
		b, ok := c.Restore.Data.(*specobject.Backup)
		if !ok {
			return nil, fmt.Errorf("restoring %s: not a helmchart backup", t.Ref())
		}
		up.Spec = maps.Clone(b.Spec)
		if policy != "" {
			up.Spec["failurePolicy"] = policy
		}
	} else {
		w, err := WriteBack(c.Values, h.Set)
		if err != nil {
			return nil, err
		}
		if err := sameValues(h, w, c.Record.ValuesHash); err != nil {
			return nil, err
		}
		for _, n := range w.Notes {
			if t.c.Log != nil {
				t.c.Log.Info("spec.set entry", "key", n.Key, "fate", string(n.Fate), "why", n.Why)
			}
		}
		up = Update{Version: c.Version, ValuesContent: w.ValuesContent, Set: w.Set, FailurePolicy: policy,
			ForceConflicts: t.apply.ForceConflicts}
		if t.apply.ServerSide != kind.ServerSideAuto {
			up.ServerSide = t.apply.ServerSide
		}
		if h.ChartContent != "" {
			if c.Chart == nil || c.Chart.Archive == nil {
				return nil, fmt.Errorf("%s carries its chart in spec.chartContent, and chart %s is not at hand to write there", t.Ref(), c.Version)
			}
			data, err := c.Chart.Archive()
			if err != nil {
				return nil, err
			}
			up.ChartContent = base64.StdEncoding.EncodeToString(data)
		}
	}
	if c.Restore == nil && c.Chart != nil {
		// apply.recreate: what the API server would refuse to update is
		// deleted first (its dependents stay); the Job creates it again
		chk, check, a := t.applyCheck(o, c)
		if _, err := chk.Recreate(ctx, check, a); err != nil {
			return nil, err
		}
	}
	now, err := t.c.Apply(ctx, h, up, annotate)
	if err != nil {
		return nil, specobject.Conflict(err)
	}
	return observe(now, r.release)
}

// sameValues makes sure the HelmChart as it will be written gives Helm
// the values whose hash the record holds.
func sameValues(h *HelmChart, w Written, want string) error {
	u, err := UserValues(&HelmChart{Namespace: h.Namespace, Name: h.Name, ValuesContent: w.ValuesContent, Set: w.Set})
	if err != nil {
		return err
	}
	got, err := values.Hash(u)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s: the spec to write would give Helm values with sha256 %s, not the merged values' %s; nothing written", h.Ref(), got, want)
	}
	return nil
}

// Backup writes the whole spec into its backup Secret, once.
func (t *Target) Backup(ctx context.Context, o *upgrade.Observed) (string, bool, error) {
	h := o.Source.(*read).chart
	return t.Save(ctx, specobject.Object{Kind: Descriptor, Namespace: h.Namespace, Name: h.Name,
		Version: o.Version, Spec: unstructuredSpec(h.Object), Annotations: h.Annotations})
}

// Look judges readiness from one read of the values Secret, the Job, the
// release and its resources.
func (t *Target) Look(ctx context.Context, o *upgrade.Observed, want upgrade.Want) (upgrade.Readiness, error) {
	v, err := t.view(ctx, o.Source.(*read))
	if err != nil {
		return upgrade.Readiness{}, err
	}
	return Judge(want, v), nil
}

// Watch starts the informers of the HelmChart, its values Secret, its Job
// and the Job's pods, its release's storage, and the resources of the
// release's newest revision.
func (t *Target) Watch(ctx context.Context) (upgrade.Watch, error) {
	return t.c.Observe(ctx, t.namespace, t.name)
}

// DeployedChart is the chart the release's newest revision deploys, as
// Helm stores it; nil when there is no release.
func (t *Target) DeployedChart(ctx context.Context) (*chart.Chart, error) {
	h, err := t.c.Get(ctx, t.namespace, t.name)
	if err != nil || h == nil {
		return nil, err
	}
	rel, err := t.c.NewestRelease(ctx, h)
	if err != nil || rel == nil {
		return nil, err
	}
	return rel.Chart, nil
}

// OwnSource is the Helm repository spec.repo names (trusting spec.repoCA
// when set); nil for a HelmChart that carries its chart or names none, for
// which the spec must give chart.source.
func (t *Target) OwnSource(ctx context.Context) (chartpkg.Source, error) {
	h, err := t.c.Get(ctx, t.namespace, t.name)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, outcome.Refused(fmt.Errorf("helmchart %s/%s not found: check the target namespace and name", t.namespace, t.name))
	}
	if h.Repo == "" || h.ChartContent != "" {
		return nil, nil
	}
	opts := chartpkg.SourceOptions{}
	if ca := h.Object.Object["spec"].(map[string]any)["repoCA"]; ca != nil {
		if s, ok := ca.(string); ok && s != "" {
			f, err := os.CreateTemp("", "chart-upgrader-repo-ca-")
			if err != nil {
				return nil, err
			}
			if _, err := f.WriteString(s); err != nil {
				return nil, err
			}
			_ = f.Close()
			opts.CAFile = f.Name()
		}
	}
	src, err := chartpkg.NewSource(h.Repo, opts)
	if err != nil {
		return nil, fmt.Errorf("%s spec.repo: %w", h.Ref(), err)
	}
	return src, nil
}

// HelmRelease is the release helm-controller's Job installs of the
// HelmChart as o shows it (the health gates read its objects).
func (t *Target) HelmRelease(_ context.Context, o *upgrade.Observed) (string, string, string, error) {
	h := o.Source.(*read).chart
	return h.TargetNamespace, h.ReleaseName(), h.Driver, nil
}
