// Package plainrelease is the target kind of a plain Helm release
// (docs/release.md; Helm 3 and 4 store it alike, Helm 4 upgrades it): the
// user values are what the release stores as user-supplied (`helm get
// values`), the old defaults come from the chart stored in the release
// itself, an apply is a Helm SDK upgrade with exactly the merged values
// (never reuse-values), Helm's history is the backup, and readiness is the
// newest revision deployed with every object of its manifest ready by
// kstatus. The record of an apply is kept in the labels of the revision it
// made, in Helm's own storage, where every process reads it.
package plainrelease
