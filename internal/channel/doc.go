// Package channel speaks the channel contract of Rancher's
// system-upgrade-controller (SUC) in both directions.
//
// Resolve asks a channel URL for a version the way SUC does: a GET that does
// not follow redirects, the version being the last path element of the
// Location of a redirect, or of the URL itself on a 2xx answer, with "+"
// turned into "-". ResolveRepo picks the highest version of a chart in a Helm
// repository (or a local directory of charts) that satisfies a semver
// constraint. Both retry network errors and 5xx answers a bounded number of
// times and always verify TLS; a 4xx answer or an unusable version is
// outcome.BadInput (exit 2).
//
// Server serves SUC channels from a Helm repository: each configured channel
// redirects to the highest version of one chart satisfying its constraint, so
// publishing a chart version upgrades the clusters that follow the channel.
// The repository index is cached and refreshed in the background; a failed
// refresh keeps the last good index.
package channel
