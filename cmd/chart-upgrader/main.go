// Command chart-upgrader upgrades Helm charts deployed through Rancher
// ManagedCharts, deciding every value by an explicit, reported policy.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/chart-upgrader/chart-upgrader/internal/cli"
)

// beforeExit runs before the process exits (the cpuprofile build ends its
// profile there).
var beforeExit = func() {}

func main() {
	// Helm's library logs its chatter through the default logger at info
	// (a hook type it skips, in the render of marked values that tracing
	// makes): the tool prints its own progress; Helm's warnings stay
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	beforeExit()
	os.Exit(code)
}
