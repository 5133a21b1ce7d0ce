// Package journal keeps chart-upgrader's records: the host lock (flock),
// the on-host journal of finished phases (one JSON file per target and
// version, written atomically, mode 0600), and the coordination.k8s.io Lease
// that lets exactly one process in the cluster apply a target.
package journal
