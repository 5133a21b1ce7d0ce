package cli

import (
	"errors"
	"fmt"

	ucli "github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/node"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func nodeCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "node",
		Usage: "cordon, drain or uncordon a node; uncordon undoes only chart-upgrader's own cordon",
		Description: "The cordon is recorded in the node annotation " + node.AnnotationCordoned + ";\n" +
			"a node someone else cordoned is left cordoned. Progress goes to stderr.\n" +
			"Exit codes: 0 done or nothing to do, 2 bad input, 3 refused (node not found, or pods\n" +
			"the drain flags do not allow to evict), 4 drain timed out.",
		Subcommands: []*ucli.Command{
			{
				Name: "cordon", Usage: "mark the node unschedulable and record that chart-upgrader did",
				Flags: nodeFlags(),
				Action: func(c *ucli.Context) error {
					name, kube, err := nodeAndClient(c)
					if err != nil {
						return err
					}
					_, err = node.Cordon(c.Context, kube, name, node.Options{Out: c.App.ErrWriter})
					return err
				},
			},
			{
				Name: "drain", Usage: "cordon the node, then evict its pods (respecting PodDisruptionBudgets) and wait until they are gone",
				Flags: append(nodeFlags(), drainFlags()...),
				Action: func(c *ucli.Context) error {
					name, kube, err := nodeAndClient(c)
					if err != nil {
						return err
					}
					return node.Drain(c.Context, kube, name, drainOptions(c))
				},
			},
			{
				Name: "uncordon", Usage: "mark the node schedulable again, if chart-upgrader cordoned it",
				Flags: nodeFlags(),
				Action: func(c *ucli.Context) error {
					name, kube, err := nodeAndClient(c)
					if err != nil {
						return err
					}
					_, err = node.Uncordon(c.Context, kube, name, node.Options{Out: c.App.ErrWriter})
					return err
				},
			},
		},
	}
}

// nodeFlags are accepted by every node subcommand.
func nodeFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "node", EnvVars: []string{"SYSTEM_UPGRADE_NODE_NAME"}, Usage: "the node's `NAME` (default: $SYSTEM_UPGRADE_NODE_NAME)"},
		&ucli.StringFlag{TakesFile: true, Name: "kubeconfig", Usage: "kubeconfig `FILE` (default: $KUBECONFIG, else the in-cluster service account)"},
	}
}

// drainFlags are kubectl drain's, with a bounded default timeout.
func drainFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.DurationFlag{Name: "timeout", Value: node.DefaultDrainTimeout, Usage: "give up after `DURATION` (exit 4), naming the pods still there"},
		&ucli.BoolFlag{Name: "ignore-daemonsets", Usage: "leave DaemonSet-managed pods in place (without it, they refuse the drain)"},
		&ucli.BoolFlag{Name: "delete-emptydir-data", Usage: "evict pods with emptyDir volumes, losing that data (without it, they refuse the drain)"},
		&ucli.StringFlag{Name: "pod-selector", Usage: "evict only the pods matching this label `SELECTOR`"},
		&ucli.IntFlag{Name: "grace-period", Value: -1, Usage: "`SECONDS` each pod gets to terminate; -1 keeps the pod's own, 0 deletes at once"},
		&ucli.BoolFlag{Name: "force", Usage: "also evict pods no controller manages (they are not recreated) and pods of deleted DaemonSets"},
	}
}

func drainOptions(c *ucli.Context) node.DrainOptions {
	var grace *int64
	if s := int64(c.Int("grace-period")); s >= 0 {
		grace = &s
	}
	return node.DrainOptions{
		Timeout: c.Duration("timeout"), IgnoreDaemonSets: c.Bool("ignore-daemonsets"),
		DeleteEmptyDirData: c.Bool("delete-emptydir-data"), PodSelector: c.String("pod-selector"),
		GracePeriodSeconds: grace, Force: c.Bool("force"), Out: c.App.ErrWriter,
	}
}

// nodeAndClient returns the node named by --node and a client connected
// as --kubeconfig, $KUBECONFIG or the in-cluster service account say.
func nodeAndClient(c *ucli.Context) (string, kubernetes.Interface, error) {
	name := c.String("node")
	if name == "" {
		return "", nil, outcome.BadInput(errors.New("node " + c.Command.Name + ": no --node given and $SYSTEM_UPGRADE_NODE_NAME is not set"))
	}
	cfg, err := cluster.RESTConfig(c.String("kubeconfig"))
	if err != nil {
		return "", nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("building the kubernetes client: %w", err)
	}
	return name, kube, nil
}
