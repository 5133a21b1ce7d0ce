// Package values decides the new user values of a chart upgrade.
//
// It is pure: given the user's values, the old and new chart defaults, the
// rules and migrations of a policy, live objects and explicit overrides, Merge
// returns the new user values and one Decision per value it looked at. It
// imports neither client-go nor Helm's action package (a test enforces it), so
// every corner of the merge is table-tested without a cluster.
package values
