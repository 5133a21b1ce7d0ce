// Package registries is how a k3s or RKE2 node pulls an image: its
// registries.yaml read as k3s reads it (mirrors, rewrites, configs), and
// an image reference resolved, as the node's containerd resolves it, to
// the endpoints it tries, in order, each with the repository it asks for
// there and the TLS settings and credentials it uses.
//
// It is pure: it reads no file and makes no request. Parse checks the
// file strictly (an unknown key, a rewrite that is not a regular
// expression, an endpoint that is not a URL are bad input naming the file,
// line and field), where k3s would ignore the key or skip the rule
// without a word. The rules, and where each comes from in k3s, wharfie and
// containerd, are in docs/design.md §7 ("Images").
package registries
