// Package cluster is chart-upgrader's access to the Kubernetes API that
// every target kind shares: the client configuration, the coordination
// Lease that makes one process apply, Events, the live objects that live
// and once rules read, and node readiness. Cluster implements the core's
// upgrade.Cluster port.
package cluster
