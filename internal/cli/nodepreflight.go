package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
)

// podNamespaceFile holds the namespace of the pod this runs in.
const podNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func nodePreflightCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "preflight",
		Usage: "predict whether the node's drain would finish, writing nothing (no cordon, no eviction)",
		Description: "Judges the drain as kubectl's filters, the eviction API (disruption budgets, eviction webhooks asked\n" +
			"with dry-run evictions), KubeVirt and Longhorn decide it, summed over the node; with --plan, the drain\n" +
			"of that system-upgrade-controller Plan, as its Job runs it (its prepare step).\n" +
			"Exit codes: 0 the drain would finish, 2 bad input (unknown node or Plan, bad selector or flag),\n" +
			"3 it would not: every blocker named, with what unblocks it.",
		Flags: append(append(nodeFlags(), drainFlags()...),
			&ucli.BoolFlag{Name: "disable-eviction", Usage: "predict a drain that deletes pods instead of evicting them (budgets and eviction webhooks bypassed)"},
			&ucli.StringFlag{Name: "plan", EnvVars: []string{"SYSTEM_UPGRADE_PLAN_NAME"}, Usage: "predict the drain of this system-upgrade-controller Plan `NAME` (its spec.drain; default: $SYSTEM_UPGRADE_PLAN_NAME); the drain flags then come from the Plan"},
			&ucli.StringFlag{Name: "plan-namespace", Usage: "the Plan's `NAMESPACE` (default: the pod's own, else " + suc.DefaultNamespace + ")"},
			newOutputFlag("text", "json"),
			&ucli.StringFlag{TakesFile: true, Name: "termination-log", Value: host.DefaultTerminationLog, Usage: "`FILE` for the one-line result (the default is written only when it exists)"},
			&ucli.StringFlag{Name: "kube-version", Usage: "also check every release on the cluster against Kubernetes `V` (as preflight --kube-version; in a k3s/RKE2 upgrade Plan: $(SYSTEM_UPGRADE_PLAN_LATEST_VERSION))"},
			&ucli.StringSliceFlag{Name: "release-source", Usage: "with --kube-version: `NAMESPACE/NAME=SOURCE`, a release's chart source; repeatable"},
		),
		Action: func(c *ucli.Context) (err error) {
			defer func() {
				if err != nil {
					host.WriteTermination(c.String("termination-log"), "", err, slog.Default())
				}
			}()
			name, cl, err := nodeAndClients(c)
			if err != nil {
				return err
			}
			opts := drainpredict.Options{Node: name, Drain: predictedDrain(c)}
			if plan := c.String("plan"); plan != "" {
				var set []string
				for _, f := range []string{"timeout", "ignore-daemonsets", "delete-emptydir-data", "pod-selector", "force", "disable-eviction"} {
					if c.IsSet(f) {
						set = append(set, "--"+f)
					}
				}
				if len(set) > 0 {
					return outcome.BadInput(fmt.Errorf("--plan %s reads the drain from the Plan's spec.drain: drop %s", plan, strings.Join(set, ", ")))
				}
				d, p, ok, err := drainpredict.PlanDrain(c.Context, cl, planNamespace(c), plan)
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintf(c.App.Writer, "Plan %s/%s has no spec.drain: its Jobs drain nothing\n", p.Namespace, p.Name)
					host.WriteTermination(c.String("termination-log"), "Plan "+p.Name+" drains nothing", nil, slog.Default())
					return nil
				}
				opts.Drain, opts.Plan = d, p
			}
			pred, err := drainpredict.Predict(c.Context, cl, opts)
			if err != nil {
				return err
			}
			text := c.String("output") != "json"
			if text {
				if err := pred.WriteText(c.App.Writer); err != nil {
					return err
				}
			}
			var report any = pred
			summary, verdict := pred.Summary(), pred.Err()
			if c.IsSet("kube-version") || c.IsSet("release-source") {
				if !c.IsSet("kube-version") {
					return outcome.BadInput(fmt.Errorf("--release-source is for --kube-version"))
				}
				if text {
					fmt.Fprintln(c.App.Writer)
				}
				rep, err := kubeVersionCheck(c, c.String("kubeconfig"), c.String("output"), c.App.Writer)
				if err != nil {
					return err
				}
				report = map[string]any{"drain": pred, "kubeVersion": rep}
				summary += "; " + rep.Summary()
				if verdict = errors.Join(verdict, rep.Err()); verdict != nil {
					verdict = outcome.Refused(verdict)
				}
			}
			if verdict == nil {
				host.WriteTermination(c.String("termination-log"), summary, nil, slog.Default())
			}
			if !text {
				return writeJSONResult(c, report, verdict)
			}
			return verdict
		},
	}
}

// predictedDrain is the drain the flags describe.
func predictedDrain(c *ucli.Context) drainpredict.Drain {
	return drainpredict.Drain{IgnoreDaemonSets: c.Bool("ignore-daemonsets"), DeleteEmptyDirData: c.Bool("delete-emptydir-data"),
		Force: c.Bool("force"), DisableEviction: c.Bool("disable-eviction"), PodSelector: c.String("pod-selector"), Timeout: c.Duration("timeout")}
}

// planNamespace is --plan-namespace, else the pod's own namespace, else
// system-upgrade-controller's usual one.
func planNamespace(c *ucli.Context) string {
	if ns := c.String("plan-namespace"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(podNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return suc.DefaultNamespace
}
