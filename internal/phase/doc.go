// Package phase runs an upgrade as a list of small, idempotent phases
// (resolve, preflight, merge, apply, wait, verify) and holds the merge
// orchestration the offline merge command shares with the merge phase:
// load the inputs, decide the values, check the chart renders with them.
package phase
