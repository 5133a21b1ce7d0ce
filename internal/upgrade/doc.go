// Package upgrade is the pure core of chart-upgrader: it works out where a
// target stands (the situation), picks the next step from it, runs that
// step through ports, and works the situation out again, until the goal is
// reached. It holds the one merge-input path shared by every command and
// the readiness judgement every kind shares.
//
// It talks to the world only through the interfaces of port.go (the
// Target, the cluster, the chart source, the journal and the hooks), so
// every step is unit-testable with in-memory fakes. It imports neither
// client-go nor Helm's action package; the import test of internal/values
// (TestPureImports) enforces it for every pure package.
package upgrade
