package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func hostCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "host",
		Usage: "what chart-upgrader keeps on the node",
		Subcommands: []*ucli.Command{{
			Name:  "prepare",
			Usage: "create the state directory and the lock directory and give them to --owner (run as root)",
			Description: "The Plan's prepare container runs this as root with only CAP_CHOWN, so that the upgrade\n" +
				"container can run as the non-root --owner. A directory that already belongs to --owner is\n" +
				"left alone; links and hard-linked files are never followed or given away. Paths as for\n" +
				"upgrade: <host-root>/var/lib/chart-upgrader and <host-root>/run/chart-upgrader; a --host-root\n" +
				"that is not a directory, or a path outside it, is bad input: nothing outside it is given away.\n" +
				"Exit codes: 0 done, 1 failure, 2 bad input.",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "owner", Usage: "the `UID:GID` the upgrade container runs as (required)"},
				&dirFlag{ucli.StringFlag{Name: "host-root", Value: host.DefaultHostRoot, Usage: "`DIR` where the node's / is mounted"}},
				&dirFlag{ucli.StringFlag{Name: "state-dir", Usage: "journal `DIR` (default: as for upgrade)"}},
				&ucli.StringFlag{TakesFile: true, Name: "lock-file", Usage: "host lock `FILE` (default: as for upgrade)"},
			},
			Action: func(c *ucli.Context) error {
				if !c.IsSet("owner") {
					return outcome.BadInput(fmt.Errorf("--owner: required (the UID:GID the upgrade runs as)"))
				}
				owner, err := host.ParseOwner(c.String("owner"))
				if err != nil {
					return outcome.BadInput(fmt.Errorf("--owner %w", err))
				}
				root := c.String("host-root")
				if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
					why := "not a directory"
					if err != nil {
						why = err.Error()
					}
					return outcome.BadInput(fmt.Errorf("--host-root %s: %s; host prepare gives away only directories under the node's / mounted there", root, why))
				}
				stateDir, lockFile := host.LocalPaths(root, c.String("state-dir"), c.String("lock-file"))
				for flag, p := range map[string]string{"--state-dir": stateDir, "--lock-file": lockFile} {
					if rel, err := filepath.Rel(root, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
						return outcome.BadInput(fmt.Errorf("%s %s: outside --host-root %s; host prepare gives away nothing outside the host root", flag, p, root))
					}
				}
				done, err := host.Prepare(stateDir, lockFile, owner)
				for _, p := range done {
					fmt.Fprintln(c.App.Writer, describe(p, owner))
				}
				return err
			},
		}},
	}
}

func describe(p host.Prepared, owner host.Owner) string {
	switch {
	case p.Unchanged:
		return fmt.Sprintf("%s: already %s's, left alone", p.Dir, owner)
	case p.Created:
		return fmt.Sprintf("%s: created, mode 0700, owner %s", p.Dir, owner)
	}
	line := fmt.Sprintf("%s: mode 0700, owner %s, %d files given to it", p.Dir, owner, p.Files)
	if p.Skipped > 0 {
		line += fmt.Sprintf(", %d entries left alone (links, hard-linked or not regular files)", p.Skipped)
	}
	return line
}
