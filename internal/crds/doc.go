// Package crds is what chart-upgrader does with the CustomResourceDefinitions
// of a chart's crds/ folders, which Helm installs once and never upgrades
// (and Fleet and klipper-helm, which run Helm, neither): under the spec's
// apply.crds policy it creates the missing ones and, with createReplace,
// replaces the changed ones, server-side as its own field manager, before
// the chart is written, and waits until each is Established
// (docs/design.md §7, "CRDs").
//
// Parse reads the crds/ files of the chart and of the subcharts the
// merged values enable; a file that is not a CustomResourceDefinition, or
// a CRD two files define differently, is bad input. Judge is the pure
// verdict on one CRD: what the policy does with it, and the refusals that
// keep an update from losing or hiding stored objects (a stored version
// dropped, a stored version no longer served while objects exist, a
// changed scope or kind, a conversion webhook without its Service). Client
// reads what the verdict needs, asks the API server for its own verdict
// with a dry-run apply, and applies.
package crds
