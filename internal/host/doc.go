// Package host holds what chart-upgrader keeps on the node: the state
// directory (the journal) and the host lock under the host root that
// system-upgrade-controller mounts at /host. CheckWritable proves, before
// an upgrade starts, that this process may write them; Prepare creates them
// for the non-root user the upgrade runs as.
package host
