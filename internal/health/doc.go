// Package health judges the health gates of an upgrade spec (wait.health):
// declared conditions on objects the chart's operators make, which must
// hold before an upgrade is done (docs/spec-and-hooks.md#health-gates).
//
// A gate names a kind and which of its objects it reads: every object of
// the kind the release renders, or, with a namespace or a label selector,
// the objects of the kind there (an operator's, outside the release).
// Its expressions are CEL, compiled once with Kubernetes' own CEL
// environment (the libraries and cost limits of the API server's
// validation rules), over the object's metadata, spec and status, the
// merged values of the upgrade and the target version. Each object is
// current, in progress or failed, as Flux judges its healthCheckExprs:
// status older than the object's generation is in progress whatever the
// expressions say; then inProgress, failed and current are evaluated in
// that order; an object none of them claims is in progress.
//
// The package is pure: it reads nothing from a cluster. Compile and
// ParseSelector are the checks of the spec parser; Judge is the wait's.
package health
