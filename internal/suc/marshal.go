package suc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	upgradev1 "github.com/rancher/system-upgrade-controller/pkg/apis/upgrade.cattle.io/v1"
	yaml "go.yaml.in/yaml/v3"
)

// Marshal prints plan as YAML: apiVersion, kind, metadata, spec, and inside
// them the field order of the controller's API types (maps sorted by key),
// two-space indent, no comment but a duration's (drain.timeout:
// 600000000000 # 10m0s), no empty status and no null creationTimestamp.
// The same Plan always gives the same bytes.
func Marshal(plan *upgradev1.Plan) ([]byte, error) {
	data, err := json.Marshal(plan)
	if err != nil {
		return nil, fmt.Errorf("encoding plan %s/%s: %w", plan.Namespace, plan.Name, err)
	}
	// JSON is YAML: decoding it into a node keeps the field order.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("converting plan %s/%s to YAML: %w", plan.Namespace, plan.Name, err)
	}
	root := doc.Content[0]
	drop(root, "status", isEmptyMap)
	if meta := field(root, "metadata"); meta != nil {
		drop(meta, "creationTimestamp", isNull)
	}
	first(root, "apiVersion")
	if drain := field(field(root, "spec"), "drain"); drain != nil {
		goDuration(field(drain, "timeout"))
	}
	plain(&doc)

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("writing plan %s/%s as YAML: %w", plan.Namespace, plan.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("writing plan %s/%s as YAML: %w", plan.Namespace, plan.Name, err)
	}
	return buf.Bytes(), nil
}

// goDuration says a duration the API types encode as nanoseconds
// (drain.timeout: 600000000000) as a Go duration, in a comment on its line
// (# 10m0s). The value stays an integer: newer controllers also take a
// string there (passed to kubectl drain as is), but the controllers whose
// DrainSpec.Timeout is a time.Duration (the API module of March 2025)
// cannot decode one, and would not run the Plan at all.
func goDuration(n *yaml.Node) {
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return
	}
	ns, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return
	}
	n.LineComment = time.Duration(ns).String()
}

// field returns the value of key in mapping m, or nil.
func field(m *yaml.Node, key string) *yaml.Node {
	if m == nil {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// drop removes key from mapping m when its value satisfies cond.
func drop(m *yaml.Node, key string, cond func(*yaml.Node) bool) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && cond(m.Content[i+1]) {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// first moves key to the front of mapping m.
func first(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			pair := []*yaml.Node{m.Content[i], m.Content[i+1]}
			rest := append(append([]*yaml.Node{}, m.Content[:i]...), m.Content[i+2:]...)
			m.Content = append(pair, rest...)
			return
		}
	}
}

func isEmptyMap(n *yaml.Node) bool { return n.Kind == yaml.MappingNode && len(n.Content) == 0 }
func isNull(n *yaml.Node) bool     { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// plain drops the JSON styles (flow maps, double quotes): the encoder then
// writes block style and quotes only strings that would read as another
// type ("true", "1.0"). Kubernetes reads manifests as YAML 1.1, so the
// strings that only YAML 1.1 reads as another type ("yes", "off", "1:20")
// are quoted too.
func plain(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && (yaml11Bool[n.Value] || base60.MatchString(n.Value)) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		plain(c)
	}
}

// The YAML 1.1 booleans and sexagesimal numbers.
var (
	yaml11Bool = map[string]bool{
		"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
		"n": true, "N": true, "no": true, "No": true, "NO": true, "off": true, "Off": true, "OFF": true,
	}
	base60 = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)
)
