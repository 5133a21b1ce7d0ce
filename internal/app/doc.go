// Package app is the composition root of chart-upgrader's commands: for
// each command it builds the ports — the API clients, the target adapter
// from the kind registry, the chart source, the host lock and journal, the
// hooks — hands them to the upgrade core, and reports the outcome. No
// decision is made here.
package app
