// Package cli holds the chart-upgrader commands: each file declares one
// command's flags and calls into the packages that do the work. Run executes
// the whole CLI in-process, so tests run it like a user does.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// Version is set at build time with -ldflags "-X ...cli.Version=v1.2.3".
var Version = "dev"

// envPrefix starts the environment variable every flag also reads.
const envPrefix = "CHART_UPGRADER_"

// Run runs the CLI with args (args[0] is the program name) and returns the
// exit code of docs/design.md §10. Errors are printed to stderr, one line each.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, normalizeArgs(args))
	if err == nil {
		return outcome.ExitOK
	}
	var exit ucli.ExitCoder
	if errors.As(err, &exit) && !outcome.Classified(err) {
		// urfave's own usage errors (unknown flag, missing required flag)
		fmt.Fprintf(stderr, "chart-upgrader: %v\n", err)
		return outcome.ExitBadInput
	}
	msg := err.Error()
	// an error of the app itself (before any command) already names it
	fmt.Fprintf(stderr, "chart-upgrader: %s\n", strings.TrimPrefix(msg, "chart-upgrader: "))
	return outcome.Code(err)
}

func newApp(stdout, stderr io.Writer) *ucli.App {
	app := &ucli.App{
		Name:    "chart-upgrader",
		Usage:   "upgrade Helm charts on Kubernetes, deciding every value by policy",
		Version: Version,
		Commands: []*ucli.Command{
			mergeCommand(),
			upgradeCommand(),
			preflightCommand(),
			statusCommand(),
			driftCommand(),
			rollbackCommand(),
			resolveCommand(),
			channelCommand(),
			planCommand(),
			nodeCommand(),
			hostCommand(),
			versionCommand(),
			completionCommand(),
		},
		Writer:    stdout,
		ErrWriter: stderr,
		// --set values hold commas (Helm syntax): a slice flag value is one
		// item; in an environment variable, items are separated by newlines.
		SliceFlagSeparator:   "\n",
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		// usage errors are returned, not printed with os.Exit
		ExitErrHandler: func(*ucli.Context, error) {},
		OnUsageError:   usageError,
	}
	for _, c := range app.Commands {
		prepare(c)
	}
	return app
}

// usageError turns urfave's usage errors (unknown flag, flag without its
// value) into bad input (exit 2), without printing the help.
func usageError(c *ucli.Context, err error, _ bool) error {
	where := "usage"
	if c.Command != nil && c.Command.Name != "" {
		where = c.Command.Name
	}
	return outcome.BadInput(fmt.Errorf("%s: %w (see --help)", where, err))
}

// normalizeArgs writes --file as -f, so the two forms of the repeatable
// flag can be mixed in one command line (urfave refuses mixed forms), in
// the order given.
func normalizeArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch {
		case a == "--file":
			a = "-f"
		case strings.HasPrefix(a, "--file="):
			a = "-f=" + strings.TrimPrefix(a, "--file=")
		}
		out[i] = a
	}
	return out
}

// prepare makes every flag of the command (and its subcommands) also read
// CHART_UPGRADER_<FLAG>, turns its usage errors into exit 2, and refuses a
// positional argument: every input is a flag, and urfave stops reading
// flags at the first word that is not one, so a forgotten flag name would
// silently drop every flag after it.
func prepare(c *ucli.Command) {
	c.OnUsageError = usageError
	if action := c.Action; action != nil {
		c.Action = func(ctx *ucli.Context) error {
			if err := checkOutput(ctx); err != nil {
				return err
			}
			err := checkInputs(ctx)
			if err == nil {
				err = action(ctx)
			}
			if err != nil {
				writeFailure(ctx, err)
			}
			return err
		}
	}
	for _, f := range c.Flags {
		// CHART_UPGRADER_<FLAG> comes first: it overrides the variables
		// system-upgrade-controller sets (SYSTEM_UPGRADE_*)
		env := []string{envName(f.Names()[0])}
		switch x := f.(type) {
		case *ucli.StringFlag:
			x.EnvVars = append(env, x.EnvVars...)
		case *dirFlag:
			x.EnvVars = append(env, x.EnvVars...)
		case *outputFlag:
			x.EnvVars = append(env, x.EnvVars...)
		case *ucli.StringSliceFlag:
			x.EnvVars = append(env, x.EnvVars...)
		case *ucli.BoolFlag:
			x.EnvVars = append(env, x.EnvVars...)
		case *ucli.DurationFlag:
			x.EnvVars = append(env, x.EnvVars...)
		case *ucli.IntFlag:
			x.EnvVars = append(env, x.EnvVars...)
		}
	}
	for _, sub := range c.Subcommands {
		prepare(sub)
	}
}

// checkInputs refuses what no command takes: a positional argument, a
// duration of zero or less, two inputs both read from standard input.
func checkInputs(ctx *ucli.Context) error {
	if ctx.NArg() > 0 && !slices.Contains(takesArguments, ctx.Command.Name) {
		return outcome.BadInput(strayArgument(commandPath(ctx), ctx.Command, ctx.Args().Slice()))
	}
	if err := checkDurations(ctx); err != nil {
		return err
	}
	return checkStdin(ctx)
}

// strayArgument says that args[0] is no flag, the flag it probably
// belongs to (a flag whose name the word contains: policy.yaml →
// --policy), and that the words after it were not read.
func strayArgument(name string, c *ucli.Command, args []string) error {
	word := args[0]
	msg := fmt.Sprintf("%s: unexpected argument %q (every input is a flag", name, word)
	base := strings.ToLower(word[strings.LastIndex(word, "/")+1:])
	for _, f := range c.Flags {
		name := f.Names()[0]
		if len(name) > 2 && strings.Contains(base, name) {
			msg += fmt.Sprintf("; did you mean --%s %s?", name, word)
			break
		}
	}
	msg += ")"
	if len(args) > 1 {
		msg += fmt.Sprintf("; nothing after it was read: %s", strings.Join(args[1:], " "))
	}
	return errors.New(msg)
}

// commandPath is the command as typed, without the program: "host prepare".
func commandPath(ctx *ucli.Context) string {
	var names []string
	for _, c := range ctx.Lineage() {
		if c.Command != nil && c.Command.Name != "" && c.Command.Name != ctx.App.Name {
			names = append([]string{c.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}

// checkDurations refuses a duration flag given as zero or negative: each
// bounds a wait, and "no bound" is never what a person means.
func checkDurations(c *ucli.Context) error {
	for _, f := range c.Command.Flags {
		if d, ok := f.(*ucli.DurationFlag); ok && c.IsSet(d.Name) && c.Duration(d.Name) <= 0 {
			return outcome.BadInput(fmt.Errorf("%s: --%s %s: must be a positive duration", commandPath(c), d.Name, c.Duration(d.Name)))
		}
	}
	return nil
}

// envName is the environment variable flag also reads:
// CHART_UPGRADER_<FLAG>, upper case, "-" as "_".
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnv says, for an error about flag's value, that the value may have
// come from its environment variable (CHART_UPGRADER_<FLAG>), when that
// holds it: a person who typed no such flag must learn where it came from.
func fromEnv(flag, value string) string {
	name := envName(flag)
	if os.Getenv(name) == value {
		return " (from $" + name + ")"
	}
	return ""
}
