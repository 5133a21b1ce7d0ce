package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

// outputFlag is -o/--output with the formats its command prints: its
// human form first (the default), then the machine forms (json, yaml).
type outputFlag struct {
	*ucli.StringFlag
	formats []string
}

func newOutputFlag(formats ...string) *outputFlag {
	return &outputFlag{
		StringFlag: &ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: formats[0], Usage: "`FORMAT`: " + kind.Or(formats)},
		formats:    formats,
	}
}

// outputOf returns the -o flag of command c, if it has one.
func outputOf(c *ucli.Command) *outputFlag {
	for _, f := range c.Flags {
		if o, ok := f.(*outputFlag); ok {
			return o
		}
	}
	return nil
}

// checkOutput refuses a -o its command does not print, naming where the
// value came from when that was the environment.
func checkOutput(c *ucli.Context) error {
	o := outputOf(c.Command)
	if o == nil {
		return nil
	}
	if f := c.String("output"); !slices.Contains(o.formats, f) {
		return outcome.BadInput(fmt.Errorf("%s: -o %q%s: want %s", commandPath(c), f, fromEnv("output", f), kind.Or(o.formats)))
	}
	return nil
}

// failure is the one object a failed run with -o json or yaml prints on
// stdout, so that a script reading stdout always has one to parse.
type failure struct {
	Error struct {
		ExitCode int      `json:"exitCode"`
		Meaning  string   `json:"meaning"`
		Reasons  []string `json:"reasons"`
	} `json:"error"`
	// Report is what the command decided before it failed (merge: every
	// decision, secrets redacted), when it got that far.
	Report any `json:"report,omitempty"`
}

// withReport is an error that carries the report of what was decided.
type withReport struct {
	err    error
	report any
}

func (e *withReport) Error() string { return e.err.Error() }
func (e *withReport) Unwrap() error { return e.err }

// writeFailure prints err as a failure object when the command's -o asks
// for a machine form: json, or yaml given on the command line (a command
// whose human form is YAML prints no object it was not asked for).
func writeFailure(c *ucli.Context, err error) {
	o := outputOf(c.Command)
	if o == nil {
		return
	}
	format := c.String("output")
	if !slices.Contains(o.formats, format) || (format != "json" && !(format == "yaml" && c.IsSet("output"))) {
		return
	}
	var f failure
	f.Error.ExitCode = outcome.Code(err)
	f.Error.Meaning = outcome.Meaning(f.Error.ExitCode)
	// one reason per error; a message over several lines (a schema's list
	// of violations) is one reason on one line
	var lines []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	f.Error.Reasons = []string{strings.Join(lines, " ")}
	var r *withReport
	if errors.As(err, &r) {
		f.Report = r.report
	}
	_ = app.WriteObject(c.App.Writer, format, f)
}
