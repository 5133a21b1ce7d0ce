package fleetsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"
	helmstatus "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
)

var yamlUnmarshal = yaml.Unmarshal

// AgentFieldManager is the field manager Fleet v0.16's agent applies as:
// it sets none, so Helm 4 names it after the agent's binary.
const AgentFieldManager = "fleetagent"

// helmRunner runs Helm 4 actions against the API server, as Fleet
// v0.16.1's agent of the local cluster does: install (server-side) when
// there is no release, else upgrade ("auto": the release's recorded apply
// method) with the given values as the complete user values, as field
// manager AgentFieldManager.
type helmRunner struct {
	getter *cluster.HelmGetter
	log    *slog.Logger
}

func newHelmRunner(cfg *rest.Config, log *slog.Logger) (*helmRunner, error) {
	cfg = rest.CopyConfig(cfg)
	// Helm's field manager is one variable of the process, which the tool
	// under test (in the same process) sets to "helm": the agent's
	// requests get its own name on the way out instead.
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return fieldManagerAs{rt: rt, from: cluster.HelmFieldManager, to: AgentFieldManager}
	})
	return &helmRunner{getter: cluster.NewHelmGetter(cfg), log: log}, nil
}

// fieldManagerAs makes the writes that name field manager from name to.
type fieldManagerAs struct {
	rt       http.RoundTripper
	from, to string
}

func (f fieldManagerAs) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if q.Get("fieldManager") != f.from {
		return f.rt.RoundTrip(req)
	}
	q.Set("fieldManager", f.to)
	req = req.Clone(req.Context())
	req.URL.RawQuery = q.Encode()
	return f.rt.RoundTrip(req)
}

func (h *helmRunner) configuration(namespace string) (*action.Configuration, error) {
	return cluster.HelmConfiguration(h.getter, namespace, cluster.SecretDriver, h.log)
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
	last, err := history(cfg, r.name)
	if err == nil {
		if err := h.failInterrupted(cfg, last); err != nil {
			return nil, err
		}
	}
	if errors.Is(err, driver.ErrReleaseNotFound) {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace, in.Replace = r.name, r.namespace, true, true
		in.Timeout, in.TakeOwnership, in.ForceReplace = r.timeout, r.takeOwnership, r.force
		// server-side unless taking ownership or replacing, as Fleet
		// v0.16.1 installs; the simulator judges the rollout itself
		// (syncAgent), so Helm waits for hooks only
		in.ServerSideApply, in.WaitStrategy = !r.takeOwnership && !r.force, kube.HookOnlyStrategy
		if reject {
			in.PostRenderer = rejectedObject{name: r.name}
		}
		res, err := in.RunWithContext(ctx, ch, r.values)
		if err != nil {
			return nil, fmt.Errorf("installing release %s/%s of chart %s %s: %w", r.namespace, r.name, r.chart, r.version, err)
		}
		return helmrelease.AsRelease(res)
	} else if err != nil {
		return nil, fmt.Errorf("reading the history of release %s/%s: %w", r.namespace, r.name, err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.MaxHistory, up.Timeout = r.namespace, r.maxHistory, r.timeout
	// as Fleet v0.16.1 upgrades: always taking ownership; "auto" (what
	// the release recorded) unless helm.force replaces objects, which
	// Helm 4 does client-side only
	up.TakeOwnership, up.WaitStrategy = true, kube.HookOnlyStrategy
	up.ServerSideApply, up.ForceReplace = "auto", r.force
	if r.force {
		up.ServerSideApply = "false"
	}
	if reject {
		up.PostRenderer = rejectedObject{name: r.name}
	}
	res, err := up.RunWithContext(ctx, r.name, ch, r.values)
	if err != nil {
		return nil, fmt.Errorf("upgrading release %s/%s to chart %s %s: %w", r.namespace, r.name, r.chart, r.version, err)
	}
	return helmrelease.AsRelease(res)
}

// render renders release r of chart ch as Helm's client-only dry run
// does, and returns the manifest; nothing is read or written.
func (h *helmRunner) render(ctx context.Context, ch *chart.Chart, r releaseSpec) (string, error) {
	in := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	in.ReleaseName, in.Namespace = r.name, r.namespace
	in.DryRunStrategy, in.Replace, in.WaitStrategy = action.DryRunClient, true, kube.HookOnlyStrategy
	res, err := in.RunWithContext(ctx, ch, r.values)
	if err == nil {
		var rel *release.Release
		if rel, err = helmrelease.AsRelease(res); err == nil {
			return rel.Manifest, nil
		}
	}
	return "", fmt.Errorf("rendering release %s/%s of chart %s %s: %w", r.namespace, r.name, r.chart, r.version, err)
}

// setStatus sets the status of revision of release ref, as Helm does when
// its wait for the rollout ends (deployed, or failed with the reason).
func (h *helmRunner) setStatus(ref releaseRef, revision int, status helmstatus.Status, description string) error {
	cfg, err := h.configuration(ref.namespace)
	if err != nil {
		return err
	}
	res, err := cfg.Releases.Get(ref.name, revision)
	if err != nil {
		return fmt.Errorf("reading release %s/%s revision %d: %w", ref.namespace, ref.name, revision, err)
	}
	rel, err := helmrelease.AsRelease(res)
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

var _ postrenderer.PostRenderer = rejectedObject{}

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
	last.SetStatus(helmstatus.StatusFailed, "interrupted; marked failed by the simulator")
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
	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	if _, err := un.Run(r.name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("uninstalling release %s/%s: %w", r.namespace, r.name, err)
	}
	return nil
}

// history is every revision of release name, oldest first.
func history(cfg *action.Configuration, name string) ([]*release.Release, error) {
	h, err := cfg.Releases.History(name)
	if err != nil {
		return nil, err
	}
	return helmrelease.Revisions(h)
}

// isConflict says whether err is a field-manager conflict of a server-side
// apply: Helm 4 fails the upgrade with it, naming the object and fields.
func isConflict(err error) bool {
	return strings.Contains(err.Error(), "conflict occurred while applying object")
}
