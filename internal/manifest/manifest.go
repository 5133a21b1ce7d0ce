// Package manifest splits a manifest, the YAML stream Helm renders and
// stores in a release, into its objects.
package manifest

import (
	"fmt"
	"sort"
	"strings"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Objects are the objects of a manifest (a YAML stream as Helm renders
// and stores it), in its order; empty documents and documents without a
// kind are skipped.
func Objects(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i, doc := range Documents(manifest) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if u.Object == nil || u.GetKind() == "" {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// Documents are the documents of a manifest, as Helm splits it, in its
// order.
func Documents(manifest string) []string {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = docs[k]
	}
	return out
}

// MakesPods reports whether objects of gk make pods from a template of
// their own (workloads, Jobs, CronJobs) or are one (a Pod).
func MakesPods(gk schema.GroupKind) bool {
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "apps", Kind: "ReplicaSet"},
		schema.GroupKind{Group: "batch", Kind: "Job"}, schema.GroupKind{Group: "batch", Kind: "CronJob"},
		schema.GroupKind{Kind: "Pod"}, schema.GroupKind{Kind: "ReplicationController"}:
		return true
	}
	return false
}
