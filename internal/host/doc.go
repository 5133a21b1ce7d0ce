// Package host holds what chart-upgrader keeps and finds on the node it
// runs on: the host lock (flock), the journal of finished steps (one JSON
// file per target and version, written atomically, mode 0600), the state
// and lock paths, the termination log, what system-upgrade-controller tells
// the container (SYSTEM_UPGRADE_*, the spec in a Plan secret), and the
// pre-/post-step hooks. CheckWritable proves, before an upgrade starts,
// that this process may write its state directory and lock file; Prepare
// creates them for the non-root user the upgrade runs as.
package host
