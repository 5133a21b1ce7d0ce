// Package spec reads the two files a person writes for chart-upgrader: the
// upgrade spec (docs/design.md §6: which targets to upgrade, in order, from which
// chart source, with which rules and migrations) and the policy file of
// `chart-upgrader merge --policy` (just rules and migrations).
//
// Parsing is strict. Every error is marked outcome.ErrBadInput (exit 2) and
// starts with the file, the 1-based line and the field path, then says what
// is wrong:
//
//	policy.yaml:7: rules[2].policy: unknown policy "prefer-magic" (want one of user, chart, ...)
//
// List indexes in field paths are 1-based: rules[3] is the third rule, as a
// person counts. A problem with a mapping as a whole (a missing field, rules
// that do not fit together) names the mapping and its first line. Errors the
// YAML parser reports without a line carry only the file name. Only the first
// problem found is reported.
//
// Unknown fields at any level, duplicate fields, values of the wrong type
// (a map where a list belongs, a bool where a string belongs), more than one
// YAML document and YAML merge keys (<<) are errors. Aliases are followed.
// A field whose value is null counts as absent. Where a string is expected a
// number is accepted as the text it was written as (from: 1.10 is "1.10").
//
// The package is pure: it imports neither client-go nor Helm's action
// package, and it checks rules and migrations with the constructors of
// internal/values, so a file that parses here is one the merge accepts.
package spec
