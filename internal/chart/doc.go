// Package chart is everything chart-upgrader knows about Helm charts on disk
// and in repositories, built on Helm 4 (helm.sh/helm/v4) as a library.
//
// Load reads a chart directory or a .tgz archive, refusing archives that are
// too large, that leave the chart directory or hold links. Defaults returns
// the coalesced default values of a chart and all its subcharts, the way Helm
// computes them. Check validates merged user values against the chart's
// values.schema.json files and renders the chart offline, as `helm template`
// would for an upgrade. RegeneratedData names the templates that generate new
// data (certificates, passwords, timestamps) on every render without a
// `lookup` guard. Source finds and loads chart versions in a local directory
// or a Helm repository, and Latest picks the highest version satisfying a
// constraint.
//
// Value trees going in and out of this package are the normalised trees of
// package values (map[string]any, int64 for integral numbers, …); the package
// never aliases a chart's own values. Errors name the path or URL they are
// about. Unusable chart input is marked outcome.BadInput (exit 2); a chart
// that does not validate or render with the merged values is marked
// outcome.Refused (exit 3) and carries Helm's schema or template error.
package chart
