package imagecheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/containerd/platforms"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	corehelpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// This file is the verdict: an image no endpoint served, or whose
// manifest lacks the platform of a node its pods may run on, is refused
// (a warning for a value no pod renders), in words naming the uses, the
// image, each endpoint tried and what it answered.

// judge is the verdict on pulls with nodes the cluster's.
func judge(pulls []*pull, nodes []corev1.Node) upgrade.ImageCheck {
	var out upgrade.ImageCheck
	for _, pl := range pulls {
		wanted := wantedPlatforms(pl.uses, nodes)
		r := upgrade.ImageReport{Image: pl.image.String(), NodePlatforms: wanted}
		for _, u := range pl.uses {
			r.UsedBy = append(r.UsedBy, u.Where)
		}
		for _, a := range pl.pulled.Tried {
			answer := "found"
			if !a.Found {
				answer = a.Said
			}
			r.Endpoints = append(r.Endpoints, upgrade.ImageEndpoint{URL: a.Endpoint.URL.String(), Repository: a.Endpoint.Repository, Answer: answer})
		}
		problem := ""
		r.Verdict = "pullable"
		switch f := pl.pulled.Found; {
		case f == nil:
			problem = fmt.Sprintf("image %s, run by %s, is served by no endpoint the nodes pull it from: %s%s",
				pl.image.Written, uses(pl.uses), tried(pl.pulled.Tried), unauthorizedHint(pl.pulled.Tried))
		case f.PlatformNotRead:
			r.Verdict = "pullable; its platform not read (--image-manifests=head)"
		default:
			r.Platforms = f.Platforms
			if missing := missingPlatforms(wanted, f.Platforms); len(missing) > 0 {
				what := "the image is " + strings.Join(f.Platforms, ", ")
				if f.Index {
					what = "its index holds " + orNone(f.Platforms)
				}
				problem = fmt.Sprintf("image %s, run by %s, has no %s for the nodes its pods may run on (%s, at %s): %s",
					pl.image.Written, uses(pl.uses), strings.Join(missing, " nor "), nodesOf(missing, pl.uses, nodes), f.Endpoint.URL.String(), what)
			}
		}
		if problem != "" {
			r.Verdict = problem
			if allFound(pl.uses) {
				out.Warnings = append(out.Warnings, values.Warning{Kind: WarnImage, Path: strings.TrimPrefix(pl.uses[0].Where, "values "),
					Message: problem + "; no pod template renders it: if an operator runs it, name it in the spec's images.values to refuse the upgrade on it"})
			} else {
				out.Refused = append(out.Refused, problem)
			}
		}
		out.Images = append(out.Images, r)
	}
	return out
}

// uses names the uses of an image, at most three, then how many more.
func uses(us []Use) string {
	var names []string
	for _, u := range us {
		names = append(names, u.Where)
	}
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("%d more", len(names)-3))
	}
	return strings.Join(names, "; ")
}

// tried is each endpoint asked and what it answered.
func tried(as []Answer) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, a.Endpoint.String()+": "+a.Said)
	}
	return strings.Join(parts, "; ")
}

func unauthorizedHint(as []Answer) string {
	for _, a := range as {
		if a.Unauthorized {
			return " (credentials: the pod's imagePullSecrets and its ServiceAccount's for the image's registry, else registries.yaml's configs for the endpoint's host)"
		}
	}
	return ""
}

func orNone(ps []string) string {
	if len(ps) == 0 {
		return "no platform"
	}
	return strings.Join(ps, ", ")
}

func allFound(us []Use) bool {
	for _, u := range us {
		if !u.Found {
			return false
		}
	}
	return true
}

// platformOf is a node's platform, os/arch.
func platformOf(n corev1.Node) string {
	return n.Status.NodeInfo.OperatingSystem + "/" + n.Status.NodeInfo.Architecture
}

// fits says whether a pod of spec may run on n: its required node
// affinity and nodeSelector match (the scheduler's own matcher), and n
// has no NoSchedule or NoExecute taint it does not tolerate.
func fits(spec *corev1.PodSpec, n *corev1.Node) bool {
	pod := &corev1.Pod{Spec: *spec}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n); !ok {
		return false
	}
	_, untolerated := corehelpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// fitting are the nodes a use's pods may run on: those they fit; every
// node when they fit none (the scheduling check speaks of that) or the
// use is a value.
func fitting(u Use, nodes []corev1.Node) []corev1.Node {
	if u.Pod == nil {
		return nodes
	}
	var out []corev1.Node
	for i := range nodes {
		if fits(u.Pod, &nodes[i]) {
			out = append(out, nodes[i])
		}
	}
	if len(out) == 0 {
		return nodes
	}
	return out
}

// wantedPlatforms are the platforms of the nodes any use may run on,
// sorted.
func wantedPlatforms(us []Use, nodes []corev1.Node) []string {
	set := map[string]bool{}
	for _, u := range us {
		for _, n := range fitting(u, nodes) {
			if p := platformOf(n); p != "/" {
				set[p] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// missingPlatforms are the wanted os/arch (nodes' platforms) that no
// platform of have (an index's or an image's, "os/arch[/variant]") is
// pulled for by containerd on such a node: one missing matches none of
// have under nodeMatcher. A platform of have that does not parse
// (platforms.Parse: an empty os or arch, say) matches no node.
func missingPlatforms(wanted, have []string) []string {
	var out []string
	for _, w := range wanted {
		m, ok := nodeMatcher(w)
		if !ok || !slices.ContainsFunc(have, func(h string) bool {
			p, err := platforms.Parse(h)
			return err == nil && m.Match(p)
		}) {
			out = append(out, w)
		}
	}
	return out
}

// nodeMatcher is the matcher containerd's CRI picks an image's platform
// with on a node of platform w, "os/arch" as the node reports it:
// platforms.Only of the node's platform normalized. Nodes report no
// variant, so it is the one Normalize gives: arm is arm/v7, arm64 has
// none (its v8, as an image's arm64/v8 normalizes to). Only admits the
// node's own platform and: on amd64, 386; on arm/vN, arm/vN-1 down to
// arm/v5; on arm64, arm/v8 down to arm/v5. ok is false when w lacks its
// os or arch (Normalize would put this binary's os in): such a node
// matches nothing.
func nodeMatcher(w string) (m platforms.MatchComparer, ok bool) {
	os, arch, _ := strings.Cut(w, "/")
	if os == "" || arch == "" {
		return nil, false
	}
	return platforms.Only(platforms.Normalize(platforms.Platform{OS: os, Architecture: arch})), true
}

// nodesOf names the nodes of the missing platforms a use may run on, at
// most three, then how many more.
func nodesOf(missing []string, us []Use, nodes []corev1.Node) string {
	seen := map[string]bool{}
	var names []string
	for _, u := range us {
		for _, n := range fitting(u, nodes) {
			if slices.Contains(missing, platformOf(n)) && !seen[n.Name] {
				seen[n.Name] = true
				names = append(names, n.Name)
			}
		}
	}
	sort.Strings(names)
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("%d more", len(names)-3))
	}
	return strings.Join(names, ", ")
}
