package kubecompat

import (
	"context"
	"fmt"

	"github.com/Masterminds/semver/v3"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

// apiModule is the k8s.io/api module this binary is built with (go.mod;
// a test holds the two together): its generated prerelease lifecycle
// (APILifecycleRemoved) says when each beta or alpha type is removed.
const apiModule = "k8s.io/api v0.37.2"

// removalData names the data of removed APIs and its newest version.
const removalData = apiModule + ": the generated prerelease lifecycle (APILifecycleRemoved) of each built-in type, data up to Kubernetes 1.37"

// forward is the way forward for a failing release: the lowest version
// of its chart, at or above the deployed one, whose kubeVersion admits
// both today's server and the target and whose rendering with the
// release's values makes no kind removed at either.
func forward(ctx context.Context, rel *release.Release, opts Options, o kind.Deployed, spec *TargetSource) string {
	key := rel.Namespace + "/" + rel.Name
	ref, name := opts.Sources[key], rel.Chart.Metadata.Name
	if ref == "" && spec != nil && spec.Source != "" {
		ref = spec.Source
		if spec.Chart != "" {
			name = spec.Chart
		}
	}
	if ref == "" && o.Repo != "" {
		ref = o.Repo
		if o.Chart != "" {
			name = o.Chart
		}
	}
	if ref == "" {
		return "no chart source known: give --release-source " + key + "=SOURCE (a repository URL or a directory) to find the chart version to upgrade to first"
	}
	src, err := chart.NewSource(ref, chart.SourceOptions{})
	if err != nil {
		return fmt.Sprintf("chart source %s: %v", ref, err)
	}
	versions, err := src.Versions(ctx, name)
	if err != nil {
		return fmt.Sprintf("chart source %s: %v", src, err)
	}
	deployedV, err := semver.NewVersion(rel.Chart.Metadata.Version)
	if err != nil {
		return fmt.Sprintf("the deployed chart version %q is not semver", rel.Chart.Metadata.Version)
	}
	for i := len(versions) - 1; i >= 0; i-- { // lowest first
		v, err := semver.NewVersion(versions[i])
		if err != nil || v.LessThan(deployedV) {
			continue
		}
		c, err := src.Load(ctx, name, versions[i])
		if err != nil {
			continue
		}
		if kv := c.Metadata.KubeVersion; kv != "" && (!chartutil.IsCompatibleRange(kv, opts.Current.String()) || !chartutil.IsCompatibleRange(kv, opts.Target.String())) {
			continue
		}
		fits := true
		for _, at := range []Version{opts.Current, opts.Target} {
			cand := *rel
			cand.Chart = c
			objs, err := renderAt(&cand, at)
			if err != nil {
				fits = false
				break
			}
			for _, o := range objs {
				if _, removed := removedAt(o.GroupVersionKind(), at); removed {
					fits = false
				}
			}
		}
		if fits {
			return fmt.Sprintf("upgrade chart %s to %s first (from %s), then move the nodes", name, versions[i], src)
		}
	}
	return fmt.Sprintf("no version of chart %s in %s at or above %s fits both Kubernetes %s and %s", name, src, deployedV, opts.Current, opts.Target)
}
