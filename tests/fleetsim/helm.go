package fleetsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

var yamlUnmarshal = yaml.Unmarshal

// helmRunner runs Helm actions against the API server, as the Fleet agent
// of the local cluster does: install when there is no release, else
// upgrade with the given values as the complete user values.
type helmRunner struct {
	getter *cluster.HelmGetter
	log    *slog.Logger
}

func newHelmRunner(cfg *rest.Config, log *slog.Logger) (*helmRunner, error) {
	return &helmRunner{getter: cluster.NewHelmGetter(cfg), log: log}, nil
}

func (h *helmRunner) configuration(namespace string) (*action.Configuration, error) {
	cfg := &action.Configuration{}
	debug := func(format string, v ...any) { h.log.Debug(fmt.Sprintf(format, v...), "component", "helm") }
	if err := cfg.Init(h.getter.For(namespace), namespace, "secret", debug); err != nil {
		return nil, fmt.Errorf("setting up Helm for namespace %s: %w", namespace, err)
	}
	return cfg, nil
}

// apply installs or upgrades release r with chart ch. With reject, Helm's
// rendered manifest gains an object the API server refuses, so the
// operation fails the way a chart that cannot be applied does: Helm writes
// the revision pending, fails to create the object and marks it failed.
func (h *helmRunner) apply(ctx context.Context, ch *chart.Chart, r releaseSpec, reject bool) (*release.Release, error) {
	// Charts may bring CRDs: let the mapper see what exists now.
	h.getter.Reset()
	cfg, err := h.configuration(r.namespace)
	if err != nil {
		return nil, err
	}
	hist := action.NewHistory(cfg)
	hist.Max = 1
	last, err := hist.Run(r.name)
	if err == nil {
		if err := h.failInterrupted(cfg, last); err != nil {
			return nil, err
		}
	}
	if errors.Is(err, driver.ErrReleaseNotFound) {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace = r.name, r.namespace, true
		in.Timeout, in.Force, in.TakeOwnership = r.timeout, r.force, r.takeOwnership
		if reject {
			in.PostRenderer = rejectedObject{name: r.name}
		}
		rel, err := in.RunWithContext(ctx, ch, r.values)
		if err != nil {
			return nil, fmt.Errorf("installing release %s/%s of chart %s %s: %w", r.namespace, r.name, r.chart, r.version, err)
		}
		return rel, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading the history of release %s/%s: %w", r.namespace, r.name, err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.MaxHistory, up.Timeout = r.namespace, r.maxHistory, r.timeout
	up.Force, up.TakeOwnership = r.force, r.takeOwnership
	if reject {
		up.PostRenderer = rejectedObject{name: r.name}
	}
	rel, err := up.RunWithContext(ctx, r.name, ch, r.values)
	if err != nil {
		return nil, fmt.Errorf("upgrading release %s/%s to chart %s %s: %w", r.namespace, r.name, r.chart, r.version, err)
	}
	return rel, nil
}

// render renders release r of chart ch as Helm's client-only dry run
// does, and returns the manifest; nothing is read or written.
func (h *helmRunner) render(ctx context.Context, ch *chart.Chart, r releaseSpec) (string, error) {
	cfg := &action.Configuration{Log: func(string, ...any) {}}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = r.name, r.namespace
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	rel, err := in.RunWithContext(ctx, ch, r.values)
	if err != nil {
		return "", fmt.Errorf("rendering release %s/%s of chart %s %s: %w", r.namespace, r.name, r.chart, r.version, err)
	}
	return rel.Manifest, nil
}

// setStatus sets the status of revision of release ref, as Helm does when
// its wait for the rollout ends (deployed, or failed with the reason).
func (h *helmRunner) setStatus(ref releaseRef, revision int, status release.Status, description string) error {
	cfg, err := h.configuration(ref.namespace)
	if err != nil {
		return err
	}
	rel, err := cfg.Releases.Get(ref.name, revision)
	if err != nil {
		return fmt.Errorf("reading release %s/%s revision %d: %w", ref.namespace, ref.name, revision, err)
	}
	rel.SetStatus(status, description)
	if err := cfg.Releases.Update(rel); err != nil {
		return fmt.Errorf("marking release %s/%s revision %d %s: %w", ref.namespace, ref.name, revision, status, err)
	}
	return nil
}

// rejectedObject is a post-renderer that appends a ConfigMap whose data
// key the API server refuses ("not a valid key!"): Helm renders the chart,
// then fails to create that object, as with a chart whose objects the
// cluster rejects.
type rejectedObject struct{ name string }

var _ postrender.PostRenderer = rejectedObject{}

func (p rejectedObject) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	out := bytes.NewBuffer(bytes.Clone(rendered.Bytes()))
	fmt.Fprintf(out, "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-rejected\ndata:\n  \"not a valid key!\": \"x\"\n", p.name)
	return out, nil
}

// failInterrupted marks a release left pending by an interrupted operation
// (say the API server went away mid-upgrade) as failed, so that the next
// upgrade can proceed. The simulator runs one operation per release at a
// time, so a pending release is always an interrupted one.
func (h *helmRunner) failInterrupted(cfg *action.Configuration, history []*release.Release) error {
	if len(history) == 0 {
		return nil
	}
	last := history[len(history)-1]
	for _, r := range history {
		if r.Version > last.Version {
			last = r
		}
	}
	if last.Info == nil || !last.Info.Status.IsPending() {
		return nil
	}
	h.log.Info("marking an interrupted Helm operation failed", "release", last.Namespace+"/"+last.Name, "revision", last.Version, "status", last.Info.Status)
	last.SetStatus(release.StatusFailed, "interrupted; marked failed by the simulator")
	if err := cfg.Releases.Update(last); err != nil {
		return fmt.Errorf("marking interrupted release %s/%s revision %d failed: %w", last.Namespace, last.Name, last.Version, err)
	}
	return nil
}

// uninstall removes a release; a missing one is not an error.
func (h *helmRunner) uninstall(_ context.Context, r releaseRef) error {
	cfg, err := h.configuration(r.namespace)
	if err != nil {
		return err
	}
	if _, err := action.NewUninstall(cfg).Run(r.name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("uninstalling release %s/%s: %w", r.namespace, r.name, err)
	}
	return nil
}
