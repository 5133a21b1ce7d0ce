// Package suc builds the system-upgrade-controller Plan that runs
// chart-upgrader (docs/design.md §9): one upgrade Job per opted-in node, the upgrade
// spec mounted from a Secret, the version pinned or followed from a channel,
// a Job deadline longer than the upgrade's wait, and containers that run
// unprivileged (UpgradeContext, PrepareContext; docs/security-context.md).
//
// Build validates PlanOptions and returns the Plan as the controller's own
// API type (upgrade.cattle.io/v1); Marshal prints it as YAML in a stable
// field order, the bytes of the manifests in plans/. The package makes no
// request to any cluster.
package suc
