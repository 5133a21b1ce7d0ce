// Command bench measures chart-upgrader against a real control plane
// (kube-apiserver + etcd from tests/testenv, with an audit log) and the
// Fleet simulator (tests/fleetsim). Each subcommand prints a markdown table
// and writes it to --out; scripts/bench-upgrade, scripts/bench-latency and
// scripts/bench-scale build the binaries and run it:
//
//	bench upgrade  chart-upgrader side by side with scripts/baseline-upgrade
//	bench latency  ready detection: the simulator's ready write → the tool's exit
//	bench scale    1,000 BundleDeployments, and one spec of 50 charts
//
// Every tool run is a separate process, measured from outside: wall time,
// CPU time (user+sys, including the children it waited for) and peak RSS
// (getrusage's ru_maxrss: the largest single process of the tree), and the
// API requests it made, read from the kube-apiserver audit log by its user
// agent and the time window of the run.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it; the benchmarks do not need it
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

const usage = `usage: bench upgrade|latency|scale [flags]   (bench COMMAND -h lists the flags)`

// run dispatches to a subcommand; out receives the table, log the progress.
func run(ctx context.Context, args []string, out, log io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	switch args[0] {
	case "upgrade":
		return upgradeCommand(ctx, args[1:], out, log)
	case "latency":
		return latencyCommand(ctx, args[1:], out, log)
	case "scale":
		return scaleCommand(ctx, args[1:], out, log)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}
