package values

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// LiveObjects are the cluster objects live and once rules read, by reference.
type LiveObjects map[ObjectRef]map[string]any

// Get returns the object named by ref.
func (l LiveObjects) Get(ref ObjectRef) (map[string]any, bool) {
	o, ok := l[ref]
	return o, ok
}

// Add stores an object under its apiVersion, kind, namespace and name.
func (l LiveObjects) Add(obj map[string]any) error {
	ref, err := refOf(obj)
	if err != nil {
		return err
	}
	l[ref] = normalize(obj).(map[string]any)
	return nil
}

// ParseLive reads a multi-document YAML (or JSON) stream of Kubernetes
// objects; `kind: List` documents contribute their items. Errors name the
// document (1-based).
func ParseLive(data []byte) (LiveObjects, error) {
	live := LiveObjects{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return live, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: invalid YAML: %w", doc, err)
		}
		if obj == nil {
			continue
		}
		objs := []map[string]any{obj}
		if kind, _ := obj["kind"].(string); kind == "List" {
			items, _ := obj["items"].([]any)
			objs = objs[:0]
			for _, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("document %d: a List item is %s, not an object", doc, typeName(normalize(it)))
				}
				objs = append(objs, m)
			}
		}
		for _, o := range objs {
			if err := live.Add(o); err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
		}
	}
}

func refOf(obj map[string]any) (ObjectRef, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if apiVersion == "" || kind == "" || name == "" {
		return ObjectRef{}, fmt.Errorf("an object needs apiVersion, kind and metadata.name")
	}
	return ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}, nil
}
