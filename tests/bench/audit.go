package main

import (
	"sort"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// User agents of the measured tools, as the API server logs them.
// chart-upgrader sets its own; kubectl's is "kubectl/v1.33.13 (linux/amd64)
// kubernetes/…"; the simulator's ("fleetsim") and this program's never
// match.
const (
	agentChartUpgrader = "chart-upgrader"
	agentKubectl       = "kubectl/"
)

// requests are the API requests of one run, from the audit log.
type requests struct {
	Total  int
	ByVerb map[string]int // get, list, watch, create, update, patch, delete…
	// ByKind counts "verb resource" (or "verb /path" for discovery).
	ByKind map[string]int
	// Applied is when the API server answered the run's last write of the
	// target, a ManagedChart or a HelmChart (its update or patch; zero when
	// it wrote none).
	Applied time.Time
	// AppliedTo is Applied per target name.
	AppliedTo map[string]time.Time
	// SchemaReads counts the reads of the cluster's OpenAPI v3 documents
	// (the conflict check's schemas); SchemaSpan is from the first one's
	// arrival to the last one's answer.
	SchemaReads int
	SchemaSpan  time.Duration
}

// attribute returns the requests whose user agent starts with agent and
// which the API server received within [from, to]. The tools run one at a
// time, so the window and the agent together name one run.
func attribute(events []testenv.AuditEvent, agent string, from, to time.Time) requests {
	r := requests{ByVerb: map[string]int{}, ByKind: map[string]int{}, AppliedTo: map[string]time.Time{}}
	var first time.Time
	for _, ev := range events {
		if !strings.HasPrefix(ev.UserAgent, agent) {
			continue
		}
		if t := ev.RequestReceivedTimestamp; t.Before(from) || t.After(to) {
			continue
		}
		r.Total++
		if strings.HasPrefix(ev.RequestURI, "/openapi/v3") {
			if r.SchemaReads == 0 {
				first = ev.RequestReceivedTimestamp
			}
			r.SchemaReads++
			if span := ev.StageTimestamp.Sub(first); span > r.SchemaSpan {
				r.SchemaSpan = span
			}
		}
		r.ByVerb[ev.Verb]++
		r.ByKind[kindOf(ev)]++
		if ref := ev.ObjectRef; ref != nil && (ref.Resource == "managedcharts" || ref.Resource == "helmcharts") && ref.Subresource == "" &&
			(ev.Verb == "update" || ev.Verb == "patch") {
			if ev.StageTimestamp.After(r.Applied) {
				r.Applied = ev.StageTimestamp
			}
			if ev.StageTimestamp.After(r.AppliedTo[ref.Name]) {
				r.AppliedTo[ref.Name] = ev.StageTimestamp
			}
		}
	}
	return r
}

// verbs renders counts by verb: "get 5, list 3, watch 3".
func (r requests) verbs() string {
	order := map[string]int{"get": 0, "list": 1, "watch": 2, "create": 3, "update": 4, "patch": 5, "delete": 6}
	keys := make([]string, 0, len(r.ByVerb))
	for k := range r.ByVerb {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		oi, iok := order[keys[i]]
		oj, jok := order[keys[j]]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" "+itoa(r.ByVerb[k]))
	}
	return strings.Join(parts, ", ")
}

// kindOf names what a request was about: "get managedcharts",
// "create events", "get /apis" (discovery).
func kindOf(ev testenv.AuditEvent) string {
	if ref := ev.ObjectRef; ref != nil && ref.Resource != "" {
		res := ref.Resource
		if ref.Subresource != "" {
			res += "/" + ref.Subresource
		}
		return ev.Verb + " " + res
	}
	path, _, _ := strings.Cut(ev.RequestURI, "?")
	return ev.Verb + " " + path
}

// add sums the requests of several runs.
func (r *requests) add(o requests) {
	if r.ByVerb == nil {
		r.ByVerb, r.ByKind = map[string]int{}, map[string]int{}
	}
	r.Total += o.Total
	for k, v := range o.ByVerb {
		r.ByVerb[k] += v
	}
	for k, v := range o.ByKind {
		r.ByKind[k] += v
	}
}

// kinds renders counts by kind, most frequent first.
func (r requests) kinds() string {
	keys := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if r.ByKind[keys[i]] != r.ByKind[keys[j]] {
			return r.ByKind[keys[i]] > r.ByKind[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" "+itoa(r.ByKind[k]))
	}
	return strings.Join(parts, ", ")
}
