package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
	"github.com/chart-upgrader/chart-upgrader/internal/kubecompat"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

func planCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "plan",
		Usage: "print the system-upgrade-controller Plan that runs chart-upgrader upgrade (YAML on stdout)",
		Description: "The Plan runs `chart-upgrader upgrade` on each node labelled --node-selector, one at a\n" +
			"time, with the upgrade spec from the Secret --spec-secret, for a pinned --version or the\n" +
			"version a --channel URL resolves to. The controller tags --image with that version, so\n" +
			"give the repository without a tag. jobActiveDeadlineSecs is --wait-timeout + 10m (the\n" +
			"controller's default deadline, 600 s, would kill the Job while it waits). The upgrade\n" +
			"container runs unprivileged as --run-as, without capabilities, on a read-only root file\n" +
			"system; a prepare container (root, CAP_CHOWN only) makes its directories under /host that\n" +
			"user's. See plans/ and docs/security-context.md.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "kind", Value: targets.Kinds()[0].Name, Usage: "the `KIND` of the spec's targets: " + planKinds() + "; it sets the defaults of --name, --node-selector, --spec-secret and --service-account. " +
				"node prints a Plan that upgrades k3s or RKE2 itself (--image rancher/k3s-upgrade or rancher/rke2-upgrade) whose prepare step predicts its drain (--preflight-image), with its RBAC (plans/node)"},
			&ucli.StringFlag{Name: "preflight-image", Usage: "with --kind node: chart-upgrader's `IMAGE` with its tag, run as the Plan's prepare step (node preflight)"},
			&ucli.StringFlag{Name: "name", Usage: "the Plan's `NAME` (default: the kind's)"},
			&ucli.StringFlag{Name: "namespace", Value: suc.DefaultNamespace, Usage: "the `NAMESPACE` of the controller, the Plan, its ServiceAccount and Secret"},
			&ucli.StringFlag{Name: "image", Usage: "image `REPOSITORY` without a tag: the controller tags it with the resolved version"},
			&ucli.StringFlag{Name: "version", Usage: "pin the chart `VERSION` to upgrade to"},
			&ucli.StringFlag{Name: "channel", Usage: "follow a system-upgrade-controller channel `URL` instead of --version"},
			&ucli.StringFlag{Name: "node-selector", Usage: "the node label `KEY=VALUE` that opts a node in (default: the kind's: " + planSelectors() + ")"},
			&ucli.StringFlag{Name: "spec-secret", Usage: "the Secret `NAME` holding spec.yaml (default: the kind's, as in plans/)"},
			&ucli.StringFlag{Name: "service-account", Usage: "the ServiceAccount `NAME` that runs the Job (default: the kind's, as in plans/)"},
			&ucli.IntFlag{Name: "concurrency", Value: suc.DefaultConcurrency, Usage: "how many `NODES` run the Job at once (0: 1)"},
			&ucli.BoolFlag{Name: "cordon", Usage: "cordon the node first (a chart upgrade does not need it)"},
			&ucli.BoolFlag{Name: "drain", Usage: "drain the node first: DaemonSets ignored, emptyDir pods evicted, at most 10m"},
			&ucli.StringFlag{Name: "run-as", Value: suc.DefaultRunAs, Usage: "the `UID:GID` of the upgrade container; 0:0 runs it as root without capabilities and without the prepare container"},
			&ucli.DurationFlag{Name: "wait-timeout", Value: suc.DefaultWaitTimeout, Usage: "the longest `DURATION` the upgrade may wait for readiness, all charts of the spec together"},
			&ucli.StringFlag{TakesFile: true, Name: "check-chart", Usage: "also print the read-only RBAC the conflict check needs: get (and list) on each object this `CHART` (directory or .tgz) renders, bound to the ServiceAccount; regenerate it when the chart changes"},
			&ucli.StringFlag{TakesFile: true, Name: "check-spec", Usage: "also print the reads the upgrade spec `FILE` makes of its own: get on the source of each live and once rule, by name; list and watch on the objects its health gates (wait.health) read, in their namespaces"},
			&ucli.StringFlag{TakesFile: true, Name: "check-values", Usage: "the user values `FILE` to render --check-chart with (default: the chart's own)"},
			newOutputFlag("yaml", "json"),
			&ucli.StringFlag{TakesFile: true, Name: "check-kubeconfig", Usage: "with --check-chart: read the scope and resource of each kind the chart does not define (a CRD another chart installed) from the discovery of the cluster this kubeconfig `FILE` reaches; without it such a kind is taken as namespaced"},
			&ucli.StringFlag{Name: "check-release", Usage: "the release --check-chart is rendered as, `NAMESPACE/NAME` (the release namespace and name the target deploys)"},
			&ucli.BoolFlag{Name: "check-crds-migrate", Usage: "with --check-crds createReplace: the spec's apply.crds migrate: true; adds update on each of the chart's CRDs' objects and on the CRDs' status (status.storedVersions), by name"},
			&ucli.StringFlag{Name: "check-crds", Value: "skip", Usage: "with --check-chart: the spec's apply.crds, `POLICY` skip, create or createReplace; create and createReplace add what applying the chart's CRDs needs: create on customresourcedefinitions, get, list, watch and patch on exactly the chart's (and, for createReplace, list on their objects)"},
		},
		Action: func(c *ucli.Context) error {
			if c.String("kind") == nodePlanKind {
				return nodePlan(c)
			}
			if c.IsSet("preflight-image") {
				return outcome.BadInput(fmt.Errorf("--preflight-image is for --kind node"))
			}
			k, err := targets.Lookup("--kind", c.String("kind"))
			if err != nil {
				return err
			}
			d := k.Plan
			or := func(flag, def string) string {
				if c.IsSet(flag) {
					return c.String(flag)
				}
				return def
			}
			var drain *suc.DrainOptions
			if c.Bool("drain") {
				drain = suc.DefaultDrain()
			}
			out, err := suc.Render(suc.PlanOptions{
				Name: or("name", d.Name), Namespace: c.String("namespace"), Image: c.String("image"),
				Version: c.String("version"), Channel: c.String("channel"), NodeSelector: or("node-selector", d.NodeSelector),
				SpecSecret: or("spec-secret", d.SpecSecret), ServiceAccount: or("service-account", d.ServiceAccount),
				Concurrency: int64(c.Int("concurrency")), Cordon: c.Bool("cordon"), Drain: drain,
				WaitTimeout: c.Duration("wait-timeout"), RunAs: c.String("run-as"),
			})
			if err != nil {
				return err
			}
			if c.IsSet("check-chart") || c.IsSet("check-spec") || c.IsSet("check-release") || c.IsSet("check-values") || c.IsSet("check-kubeconfig") || c.IsSet("check-crds") || c.IsSet("check-crds-migrate") {
				if !c.IsSet("check-release") {
					return outcome.BadInput(fmt.Errorf("--check-chart, --check-spec, --check-values, --check-kubeconfig and --check-crds need --check-release NAMESPACE/NAME"))
				}
				policy := c.String("check-crds")
				if !slices.Contains(kind.CRDPolicies, policy) {
					return outcome.BadInput(fmt.Errorf("--check-crds %q: want skip, create or createReplace (the spec's apply.crds)", policy))
				}
				if c.Bool("check-crds-migrate") && policy != "createReplace" {
					return outcome.BadInput(fmt.Errorf("--check-crds-migrate needs --check-crds createReplace (a migration is part of replacing a CRD)"))
				}
				// one set of these per release: a spec of several charts
				// applies each chart's, and none may replace another's
				_, release, _ := strings.Cut(c.String("check-release"), "/")
				name := or("name", d.Name) + "-" + release
				rbac, err := app.CheckRBAC(c.Context, app.CheckRBACInput{Chart: c.String("check-chart"), Values: c.String("check-values"),
					Release: c.String("check-release"), Kubeconfig: c.String("check-kubeconfig"), Spec: c.String("check-spec")}, suc.CheckRBACOptions{
					Name: name + "-conflict-check", Namespace: c.String("namespace"), ServiceAccount: or("service-account", d.ServiceAccount),
					CRDPolicy: policy, CRDMigrate: c.Bool("check-crds-migrate")})
				if err != nil {
					return err
				}
				out = append(append(out, "---\n"...), rbac...)
			}
			if c.String("output") == "json" {
				return writePlanJSON(c.App.Writer, out)
			}
			_, err = c.App.Writer.Write(out)
			return err
		},
	}
}

// writePlanJSON prints the YAML documents of plan as one JSON object: a
// v1 List of them when there are several, as `kubectl get -o json` does.
func writePlanJSON(w io.Writer, docs []byte) error {
	var items []any
	dec := yaml.NewDecoder(bytes.NewReader(docs))
	for {
		var doc any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		if doc != nil {
			items = append(items, doc)
		}
	}
	if len(items) == 1 {
		return app.WriteObject(w, "json", items[0])
	}
	return app.WriteObject(w, "json", map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// planKinds names each kind with the example manifests of its Plans.
func planKinds() string {
	var out []string
	for _, k := range targets.Kinds() {
		out = append(out, fmt.Sprintf("%s (%s)", k.Name, k.Plan.Dir))
	}
	return kind.Or(out)
}

// planSelectors names each kind's default node selector.
func planSelectors() string {
	var out []string
	for _, k := range targets.Kinds() {
		out = append(out, k.Name+" "+k.Plan.NodeSelector)
	}
	return strings.Join(out, ", ")
}

// nodePlanKind is --kind's value for a Plan that upgrades the nodes'
// k3s or RKE2.
const nodePlanKind = "node"

// nodePlan prints the k3s/RKE2 upgrade Plan whose prepare step predicts
// its drain, and its RBAC (the prediction's reads derived from its rules).
func nodePlan(c *ucli.Context) error {
	var set []string
	for _, f := range []string{"spec-secret", "cordon", "drain", "run-as", "wait-timeout", "check-chart", "check-spec", "check-values",
		"check-kubeconfig", "check-release", "check-crds", "check-crds-migrate"} {
		if c.IsSet(f) {
			set = append(set, "--"+f)
		}
	}
	if len(set) > 0 {
		return outcome.BadInput(fmt.Errorf("--kind node: %s are for chart upgrade Plans (a node Plan always drains, with the defaults of --drain)", strings.Join(set, ", ")))
	}
	out, err := suc.RenderNodePlan(suc.NodePlanOptions{
		Name: c.String("name"), Namespace: c.String("namespace"), Image: c.String("image"), Version: c.String("version"),
		Channel: c.String("channel"), PreflightImage: c.String("preflight-image"), NodeSelector: c.String("node-selector"),
		ServiceAccount: c.String("service-account"), Concurrency: int64(c.Int("concurrency")), PreflightRules: append(drainpredict.RBAC(), kubecompat.RBAC()...),
	})
	if err != nil {
		return err
	}
	if c.String("output") == "json" {
		return writePlanJSON(c.App.Writer, out)
	}
	_, err = c.App.Writer.Write(out)
	return err
}
