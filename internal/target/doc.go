// Package target reads and writes the objects chart-upgrader upgrades — a
// Rancher ManagedChart and the Fleet Bundle and BundleDeployments Rancher
// makes of it — and judges their readiness. The judgement is a pure
// function of the objects (Evaluate), table-tested; the client and the
// watch only fetch what it needs.
package target
