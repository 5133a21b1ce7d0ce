package fleetsim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// BundleDeployment states, as Fleet names them.
const (
	StateReady       = "Ready"
	StateNotReady    = "NotReady"
	StatePending     = "Pending"
	StateOutOfSync   = "OutOfSync"
	StateModified    = "Modified"
	StateWaitApplied = "WaitApplied"
	StateErrApplied  = "ErrApplied"
)

// stateRank orders states from best to worst, like Fleet's StateRank.
var stateRank = map[string]int{
	StateReady: 0, StateNotReady: 1, StatePending: 2, StateOutOfSync: 3,
	StateModified: 4, StateWaitApplied: 5, StateErrApplied: 6,
}

// maxNonReadyResources is how many non-ready entries a summary lists.
const maxNonReadyResources = 10

// bdView is what the Bundle status needs from one BundleDeployment.
type bdView struct {
	Cluster      string
	StagedID     string
	DeploymentID string
	AppliedID    string
	Ready        bool
	NonModified  bool
	DeployFailed bool   // the Deployed condition is False
	DeployError  string // its message
	nonReadyRaw  []any
	modifiedRaw  []any
	resourcesRaw []any
}

func viewOf(u *unstructured.Unstructured) bdView {
	v := bdView{Cluster: u.GetLabels()[LabelCluster]}
	v.StagedID, _, _ = unstructured.NestedString(u.Object, "spec", "stagedDeploymentID")
	v.DeploymentID, _, _ = unstructured.NestedString(u.Object, "spec", "deploymentID")
	v.AppliedID, _, _ = unstructured.NestedString(u.Object, "status", "appliedDeploymentID")
	v.Ready, _, _ = unstructured.NestedBool(u.Object, "status", "ready")
	v.NonModified, _, _ = unstructured.NestedBool(u.Object, "status", "nonModified")
	v.nonReadyRaw, _, _ = unstructured.NestedSlice(u.Object, "status", "nonReadyStatus")
	v.modifiedRaw, _, _ = unstructured.NestedSlice(u.Object, "status", "modifiedStatus")
	v.resourcesRaw, _, _ = unstructured.NestedSlice(u.Object, "status", "resources")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Deployed" && m["status"] == "False" {
			v.DeployFailed = true
			v.DeployError, _ = m["message"].(string)
		}
	}
	return v
}

// state is Fleet's GetDeploymentState, plus Pending for a BundleDeployment
// whose spec does not carry the Bundle's current content yet. A failed
// deployment shows as ErrApplied even when it re-applies the same ID.
func (v bdView) state(stagedID string) string {
	switch {
	case v.StagedID != stagedID:
		return StatePending
	case v.DeployFailed:
		return StateErrApplied
	case v.AppliedID != v.DeploymentID:
		return StateWaitApplied
	case !v.Ready:
		return StateNotReady
	case v.DeploymentID != v.StagedID:
		return StateOutOfSync
	case !v.NonModified:
		return StateModified
	default:
		return StateReady
	}
}

// unavailable is Fleet's rule: not at the wanted deployment, or not ready.
func (v bdView) unavailable(stagedID string) bool {
	return v.StagedID != stagedID || v.AppliedID != v.DeploymentID || !v.Ready
}

// computeBundleStatus summarises the BundleDeployments of a Bundle of the
// given generation whose content has staged ID stagedID. desired is the
// number of target clusters; missing BundleDeployments count as Pending.
func computeBundleStatus(generation int64, desired int, views []bdView, stagedID, workspace string) bundleStatus {
	st := bundleStatus{ObservedGeneration: generation, MaxUnavailable: desired}
	st.Summary.DesiredReady = desired
	sort.Slice(views, func(i, j int) bool { return clusterIndex(views[i].Cluster) < clusterIndex(views[j].Cluster) })
	worst := StateReady
	for _, v := range views {
		s := v.state(stagedID)
		if v.unavailable(stagedID) {
			st.Unavailable++
		}
		count(&st.Summary, s)
		if stateRank[s] > stateRank[worst] {
			worst = s
		}
		if s == StateReady || len(st.Summary.NonReadyResources) >= maxNonReadyResources {
			continue
		}
		r := nonReadyResource{Name: workspace + "/" + v.Cluster, State: s}
		if s == StateErrApplied {
			r.Message = v.DeployError
		}
		r.ModifiedStatus = convertSlice[modifiedStatus](v.modifiedRaw)
		r.NonReadyStatus = convertSlice[nonReadyStatus](v.nonReadyRaw)
		st.Summary.NonReadyResources = append(st.Summary.NonReadyResources, r)
	}
	if missing := desired - len(views); missing > 0 {
		st.Summary.Pending += missing
		st.Unavailable += missing
		if stateRank[StatePending] > stateRank[worst] {
			worst = StatePending
		}
	}
	st.Display.ReadyClusters = fmt.Sprintf("%d/%d", st.Summary.Ready, desired)
	st.Display.State = worst
	ready := condition{Type: "Ready", Status: "True"}
	if msg := summaryMessage(st.Summary); msg != "" {
		ready = condition{Type: "Ready", Status: "False", Message: msg}
	}
	st.Conditions = []condition{ready}
	for _, v := range views {
		if v.Cluster == LocalCluster {
			st.ResourceKey = convertSlice[resourceKey](v.resourcesRaw)
		}
	}
	return st
}

func count(s *bundleSummary, state string) {
	switch state {
	case StateReady:
		s.Ready++
	case StateNotReady:
		s.NotReady++
	case StatePending:
		s.Pending++
	case StateOutOfSync:
		s.OutOfSync++
	case StateModified:
		s.Modified++
	case StateWaitApplied:
		s.WaitApplied++
	case StateErrApplied:
		s.ErrApplied++
	}
}

// summaryMessage is empty when every cluster is ready, else Fleet's style:
// "ErrApplied(1) [Cluster ns/local: boom]; configmap.v1 ns/name modified".
func summaryMessage(s bundleSummary) string {
	if s.DesiredReady > 0 && s.Ready == s.DesiredReady {
		return ""
	}
	byState := map[string][]string{}
	var details []string
	for _, r := range s.NonReadyResources {
		name := "Cluster " + r.Name
		if r.Message != "" {
			name += ": " + r.Message
		}
		byState[r.State] = append(byState[r.State], name)
		for _, m := range r.ModifiedStatus {
			what := "modified"
			if m.Missing {
				what = "missing"
			} else if m.Delete {
				what = "extra"
			}
			details = append(details, fmt.Sprintf("%s %s %s", kindVersion(m.Kind, m.APIVersion), objName(m.Namespace, m.Name), strings.TrimSpace(what+" "+m.Patch)))
		}
		for _, n := range r.NonReadyStatus {
			details = append(details, fmt.Sprintf("%s %s [%s] %s", kindVersion(n.Kind, n.APIVersion), objName(n.Namespace, n.Name), n.Summary.State, strings.Join(n.Summary.Message, "; ")))
		}
	}
	counts := map[string]int{
		StateErrApplied: s.ErrApplied, StateWaitApplied: s.WaitApplied, StateModified: s.Modified,
		StateOutOfSync: s.OutOfSync, StatePending: s.Pending, StateNotReady: s.NotReady,
	}
	var parts []string
	for _, st := range []string{StateErrApplied, StateWaitApplied, StateModified, StateOutOfSync, StatePending, StateNotReady} {
		if counts[st] == 0 {
			continue
		}
		part := fmt.Sprintf("%s(%d)", st, counts[st])
		if names := byState[st]; len(names) > 0 {
			part += " [" + strings.Join(names, ", ") + "]"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		parts = append(parts, "no cluster ready")
	}
	if len(details) > 0 {
		parts = append(parts, details[0])
	}
	return strings.Join(parts, "; ")
}

func kindVersion(kind, apiVersion string) string {
	return strings.ToLower(kind) + "." + apiVersion
}

func objName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// mergeConditions keeps the timestamps of conditions that did not change,
// so that an unchanged status compares equal and is not rewritten.
func mergeConditions(old []any, conds []condition, now time.Time) []condition {
	prev := map[string]condition{}
	for _, c := range convertSlice[condition](old) {
		prev[c.Type] = c
	}
	ts := now.UTC().Format(time.RFC3339)
	out := make([]condition, len(conds))
	for i, c := range conds {
		p, ok := prev[c.Type]
		switch {
		case ok && p.Status == c.Status && p.Message == c.Message && p.Reason == c.Reason:
			c.LastUpdateTime, c.LastTransitionTime = p.LastUpdateTime, p.LastTransitionTime
		case ok && p.Status == c.Status:
			c.LastUpdateTime, c.LastTransitionTime = ts, p.LastTransitionTime
		default:
			c.LastUpdateTime, c.LastTransitionTime = ts, ts
		}
		out[i] = c
	}
	return out
}

// convertSlice decodes unstructured list items into T, skipping bad ones.
func convertSlice[T any](items []any) []T {
	var out []T
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		var v T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &v); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// toMap encodes a status struct the way the API server returns it.
func toMap(v any) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	if err != nil {
		return nil, fmt.Errorf("encoding a status: %w", err)
	}
	return m, nil
}
