package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func completionCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: completion bash, completion zsh or completion fish",
		UsageText: "chart-upgrader completion bash|zsh|fish",
		Description: "bash: source <(chart-upgrader completion bash), or save it in\n" +
			"/etc/bash_completion.d/chart-upgrader.\n" +
			"zsh: source <(chart-upgrader completion zsh) (it loads bashcompinit).\n" +
			"fish: chart-upgrader completion fish > ~/.config/fish/completions/chart-upgrader.fish\n" +
			"Commands, flags, the formats of -o and file names after a flag that takes a FILE are completed.",
		Action: func(c *ucli.Context) error {
			shell := c.Args().First()
			var script string
			switch shell {
			case "bash":
				script = bashCompletion(c.App)
			case "zsh":
				script = "# zsh completion for chart-upgrader: the bash completion, through bashcompinit\n" +
					"autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n" + bashCompletion(c.App)
			case "fish":
				var err error
				if script, err = c.App.ToFishCompletion(); err != nil {
					return err
				}
			case "":
				return outcome.BadInput(fmt.Errorf("completion: name the shell: completion bash, completion zsh or completion fish"))
			default:
				return outcome.BadInput(fmt.Errorf("completion: unknown shell %q: want bash, zsh or fish", shell))
			}
			if c.NArg() > 1 {
				return outcome.BadInput(fmt.Errorf("completion: one shell, not %q", strings.Join(c.Args().Slice(), " ")))
			}
			_, err := io.WriteString(c.App.Writer, script)
			return err
		},
	}
}

// takesArguments names the commands whose words are not flags, which
// prepare does not refuse.
var takesArguments = []string{"completion"}

// bashCompletion is a static bash completion script for app: the command
// is found from the words typed, then its flags are offered, or, after a
// flag, its value (file names, directories, the -o formats).
func bashCompletion(app *ucli.App) string {
	var b strings.Builder
	b.WriteString(`# bash completion for chart-upgrader (chart-upgrader completion bash)
_chart_upgrader() {
  local cur prev cmd w i
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    case "$cmd/$w" in
`)
	var paths []string
	var walk func(prefix string, cmds []*ucli.Command)
	walk = func(prefix string, cmds []*ucli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			p := strings.TrimPrefix(prefix+" "+c.Name, " ")
			fmt.Fprintf(&b, "      %q) cmd=%q ;;\n", strings.TrimPrefix(prefix, " ")+"/"+c.Name, p)
			paths = append(paths, p)
			walk(" "+p, c.Subcommands)
		}
	}
	walk("", app.Commands)
	b.WriteString("    esac\n  done\n  case \"$cmd/$prev\" in\n")
	find := func(path string) *ucli.Command {
		cmds := app.Commands
		var c *ucli.Command
		for _, name := range strings.Fields(path) {
			for _, x := range cmds {
				if x.Name == name {
					c = x
				}
			}
			cmds = c.Subcommands
		}
		return c
	}
	for _, p := range paths {
		c := find(p)
		for _, f := range c.Flags {
			var names []string
			for _, n := range f.Names() {
				if len(n) == 1 {
					names = append(names, fmt.Sprintf("%q", p+"/-"+n))
				} else {
					names = append(names, fmt.Sprintf("%q", p+"/--"+n))
				}
			}
			var reply string
			if o, ok := f.(*outputFlag); ok {
				reply = fmt.Sprintf(`COMPREPLY=($(compgen -W %q -- "$cur")); return`, strings.Join(o.formats, " "))
			} else {
				switch valueKind(f) {
				case "file":
					reply = `COMPREPLY=($(compgen -f -- "$cur")); return`
				case "dir":
					reply = `COMPREPLY=($(compgen -d -- "$cur")); return`
				case "value":
					reply = `COMPREPLY=(); return`
				default:
					continue
				}
			}
			fmt.Fprintf(&b, "    %s) %s ;;\n", strings.Join(names, "|"), reply)
		}
	}
	b.WriteString("  esac\n  case \"$cmd\" in\n")
	fmt.Fprintf(&b, "    \"\") w=%q ;;\n", strings.Join(commandNames(app.Commands), " "))
	for _, p := range paths {
		c := find(p)
		var words []string
		words = append(words, commandNames(c.Subcommands)...)
		if p == "completion" {
			words = append(words, "bash", "zsh", "fish")
		}
		for _, f := range c.Flags {
			for _, n := range f.Names() {
				if len(n) == 1 {
					words = append(words, "-"+n)
				} else {
					words = append(words, "--"+n)
				}
			}
		}
		fmt.Fprintf(&b, "    %q) w=%q ;;\n", p, strings.Join(words, " "))
	}
	b.WriteString(`  esac
  COMPREPLY=($(compgen -W "$w" -- "$cur"))
}
complete -o default -F _chart_upgrader chart-upgrader
`)
	return b.String()
}

// commandNames are the names of the visible commands.
func commandNames(cmds []*ucli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" && !slices.Contains(out, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}
