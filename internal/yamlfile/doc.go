// Package yamlfile is the one strict YAML decoder for the configuration
// files a person writes for chart-upgrader: the upgrade spec and the policy
// file (package spec) and the channel server configuration (package
// channel). Each of them walks the yaml.Node tree of its file with the
// checks here, so the three files follow the same rules and report problems
// the same way. Helm values files are not read here: values are loosely
// typed by nature and package values reads them as Helm does.
//
// The rules, the same for every file:
//
//   - The file holds exactly one YAML document. An empty file, or one
//     holding only comments or null, is an error; so is a second document
//     (empty documents after the first, as a trailing "---", are ignored).
//   - Fields not in the schema, at any level, are errors naming the field
//     and listing the fields there are. A field given twice is an error
//     naming both lines. Field names are strings: a number, bool or null
//     as a key is an error, and so is a YAML merge key (<<).
//   - Values have the type the schema says, with no coercion either way: a
//     number, bool, map or list where a string belongs is an error (quote
//     1.10 to mean the text "1.10"), and so is a string where a bool, map or
//     list belongs.
//   - Aliases are followed. A field whose value is null counts as absent.
//
// Every error is marked outcome.ErrBadInput (exit 2) and is an *Error: the
// file as named by the caller, the 1-based line, the field path, then what
// is wrong:
//
//	policy.yaml:7: rules[2].policy: unknown policy "prefer-magic" (want one of user, chart, ...)
//
// List indexes in field paths are 1-based: rules[3] is the third rule, as a
// person counts. A key that is not plain letters, digits, '_' and '-' is
// bracketed and quoted: channels["a/b"]. A problem with a mapping as a whole
// (a missing field) names the mapping and its first line. Errors the YAML
// parser reports without a line carry only the file name.
//
// The package is pure: it reads no file but the one Read is given and
// imports nothing but the YAML parser and package outcome.
package yamlfile
