package cli

import ucli "github.com/urfave/cli/v2"

// dirFlag is a string flag whose value is a directory: completion offers
// directories. A flag whose value is a file (or a chart's path) says so
// where it is declared with urfave's own TakesFile; any other flag that
// takes a value takes a word.
type dirFlag struct{ ucli.StringFlag }

// valueKind is what a flag's value is, as the flag declares it: "file",
// "dir", "value" (a word), or "" for a flag that takes none.
func valueKind(f ucli.Flag) string {
	switch x := f.(type) {
	case *dirFlag:
		return "dir"
	case *ucli.StringFlag:
		if x.TakesFile {
			return "file"
		}
	case *ucli.StringSliceFlag:
		if x.TakesFile {
			return "file"
		}
	}
	if d, ok := f.(ucli.DocGenerationFlag); ok && d.TakesValue() {
		return "value"
	}
	return ""
}
