package cli

import (
	"errors"
	"fmt"

	ucli "github.com/urfave/cli/v2"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
	"github.com/chart-upgrader/chart-upgrader/internal/node"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func nodeCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "node",
		Usage: "cordon, drain or uncordon a node, or predict its drain; uncordon undoes only chart-upgrader's own cordon",
		Description: "The cordon is recorded in the node annotation " + node.AnnotationCordoned + ";\n" +
			"a node someone else cordoned is left cordoned. Progress goes to stderr.\n" +
			"drain first predicts the drain (as node preflight does) and refuses before the cordon when it\n" +
			"would not finish; --skip-preflight turns that off.\n" +
			"Exit codes: 0 done or nothing to do (preflight: the drain would finish), 2 bad input, 3 refused\n" +
			"(node not found, pods the drain flags do not allow to evict, a drain predicted not to finish), 4 drain timed out.",
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
				Name:  "drain",
				Usage: "predict the drain, cordon the node, then evict its pods (respecting PodDisruptionBudgets) and wait until they are gone",
				Flags: append(append(nodeFlags(), drainFlags()...),
					&ucli.BoolFlag{Name: "skip-preflight", Usage: "do not predict the drain before the cordon (the output says it was skipped)"}),
				Action: func(c *ucli.Context) error {
					name, cl, err := nodeAndClients(c)
					if err != nil {
						return err
					}
					opts := drainOptions(c)
					opts.Dynamic, opts.SkipPreflight = cl.Dynamic, c.Bool("skip-preflight")
					return node.Drain(c.Context, cl.Kube, name, opts)
				},
			},
			nodePreflightCommand(),
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
	name, cl, err := nodeAndClients(c)
	return name, cl.Kube, err
}

// nodeAndClients is nodeAndClient with a dynamic client too.
func nodeAndClients(c *ucli.Context) (string, drainpredict.Clients, error) {
	name := c.String("node")
	if name == "" {
		return "", drainpredict.Clients{}, outcome.BadInput(errors.New("node " + c.Command.Name + ": no --node given and $SYSTEM_UPGRADE_NODE_NAME is not set"))
	}
	kube, dyn, err := kubeAndDynamic(c.String("kubeconfig"))
	if err != nil {
		return "", drainpredict.Clients{}, err
	}
	return name, drainpredict.Clients{Kube: kube, Dynamic: dyn}, nil
}

// kubeAndDynamic are the typed and dynamic clients connected as
// kubeconfig, $KUBECONFIG or the in-cluster service account say.
func kubeAndDynamic(kubeconfig string) (kubernetes.Interface, dynamic.Interface, error) {
	cfg, err := cluster.RESTConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building the kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	return kube, dyn, nil
}
