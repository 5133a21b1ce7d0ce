// Package managedchart is the target adapter for Rancher ManagedCharts
// (management.cattle.io/v3): it reads and writes a ManagedChart, and
// judges readiness through what Rancher and Fleet make of it — Bundle
// mcc-<name> and its BundleDeployments. Everything Fleet-specific lives
// here. The judgement is a pure function of the objects (Evaluate,
// Health), table-tested; the client and the watch only fetch what it needs.
package managedchart
