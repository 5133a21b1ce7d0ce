package cli

import (
	"fmt"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/kubecompat"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
)

// kubeVersionFlags check every release against the next Kubernetes
// version (preflight --kube-version, node preflight --kube-version).
func kubeVersionFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "kube-version", Usage: "check every release on the cluster against Kubernetes `V` (1.34, v1.34.2, v1.34.2+k3s1, v1.34.2+rke2r1): its kubeVersion, the removed APIs of its manifest, its rendering at V"},
		&ucli.StringSliceFlag{Name: "release-source", Usage: "with --kube-version: `NAMESPACE/NAME=SOURCE`, the chart source (repository URL or directory) of a release, to find the chart version to upgrade to first (a source named by the object that deploys the release is found on its own); repeatable"},
	}
}

// kubeVersionCheck runs the check of --kube-version with the clients of
// kubeconfig; with format text it writes the report to out.
func kubeVersionCheck(c *ucli.Context, kubeconfig, format string, out io.Writer) (*kubecompat.Report, error) {
	target, err := kubecompat.ParseVersion(c.String("kube-version"))
	if err != nil {
		return nil, err
	}
	sources := map[string]string{}
	for _, s := range c.StringSlice("release-source") {
		key, ref, ok := strings.Cut(s, "=")
		if ns, name, _ := strings.Cut(key, "/"); !ok || ns == "" || name == "" || ref == "" {
			return nil, outcome.BadInput(fmt.Errorf("--release-source %q: want NAMESPACE/NAME=SOURCE (a repository URL or a directory)", s))
		}
		sources[key] = ref
	}
	var specTargets []kubecompat.TargetSource
	if path := c.String("spec"); path != "" {
		sp, err := spec.LoadSpec(path, targets.Kinds())
		if err != nil {
			return nil, err
		}
		for _, ch := range sp.Charts {
			d, err := targets.Lookup("target "+ch.Target.String(), ch.Target.Kind)
			if err != nil {
				return nil, err
			}
			specTargets = append(specTargets, kubecompat.TargetSource{Object: d.Spelling + " " + ch.Target.Namespace + "/" + ch.Target.Name,
				Namespace: ch.Target.Namespace, Name: ch.Target.Name, Source: ch.Chart.Source, Chart: ch.Chart.Name})
		}
	}
	kube, dyn, err := kubeAndDynamic(kubeconfig)
	if err != nil {
		return nil, err
	}
	sv, err := kube.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server's version: %w", err)
	}
	current, err := kubecompat.ParseVersion(sv.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("the server's version %q: %w", sv.GitVersion, err)
	}
	rep, err := kubecompat.Check(c.Context, kubecompat.Clients{Kube: kube, Dynamic: dyn}, kubecompat.Options{Target: target, Current: current, Sources: sources, Targets: specTargets})
	if err != nil {
		return nil, err
	}
	if format != "json" {
		err = rep.WriteText(out)
	}
	return rep, err
}

// writeJSONResult prints report as JSON when verdict is nil; otherwise
// the verdict carries it, and the failure object printed for -o json
// holds it (one object on stdout either way).
func writeJSONResult(c *ucli.Context, report any, verdict error) error {
	if verdict != nil {
		return &withReport{err: verdict, report: report}
	}
	return app.WriteObject(c.App.Writer, "json", report)
}
