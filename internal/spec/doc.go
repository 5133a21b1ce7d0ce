// Package spec reads the two files a person writes for chart-upgrader: the
// upgrade spec (docs/design.md §6: which targets to upgrade, in order, from which
// chart source, with which rules and migrations) and the policy file of
// `chart-upgrader merge --policy` (just rules and migrations).
//
// Parsing is strict, with the rules of package yamlfile, which the channel
// server configuration follows too: unknown or duplicate fields, values of
// the wrong type (a number or a bool where a string belongs: write
// from: "1.10"), an empty file, a second YAML document and YAML merge keys
// (<<) are errors. Every error is marked outcome.ErrBadInput (exit 2) and
// starts with the file, the 1-based line and the field path, then says what
// is wrong:
//
//	policy.yaml:7: rules[2].policy: unknown policy "prefer-magic" (want one of user, chart, ...)
//
// Only the first problem found is reported.
//
// The package is pure: it imports neither client-go nor Helm's action
// package, and it checks rules and migrations with the constructors of
// internal/values, so a file that parses here is one the merge accepts.
package spec
