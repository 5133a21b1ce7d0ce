// Package helmrelease reads Helm releases (Helm 3 and 4 store them alike)
// as Helm stores them, and judges and watches the readiness of the objects
// a release revision deployed, for every kind whose charts end up as a Helm
// release (a k3s HelmChart, a plain release): the newest revision through
// Helm's own storage drivers (Secrets, or ConfigMaps), the objects of its
// manifest, and their readiness by kstatus (sigs.k8s.io/cli-utils), once
// (Look) or watched (Watcher: one list and one watch per object, and of the
// release's storage objects; nothing is polled).
package helmrelease
