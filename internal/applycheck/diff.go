package applycheck

import (
	"encoding/base64"
	"fmt"
	"maps"
	"reflect"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// This file is the change the apply makes to each object, for people
// (preflight -o diff): the live object against the one the apply stores,
// as helm-diff shows it, from the same computed apply as the conflict
// check.

// change is one object's before and after (before nil: a create; after
// nil: a delete), kept until a diff is asked for.
type change struct {
	object        string
	before, after *unstructured.Unstructured
}

// Changes are the changes of res, each with its unified diff, in
// manifest order (deletions last); an object the apply leaves as it is
// is left out.
func (r Result) Changes() []upgrade.ObjectChange {
	var out []upgrade.ObjectChange
	for _, c := range r.changes {
		action := "update"
		switch {
		case c.before == nil:
			action = "create"
		case c.after == nil:
			action = "delete"
		}
		before, after := shown(c.before, nil), shown(c.after, c.before)
		if action == "update" && reflect.DeepEqual(before, after) {
			continue
		}
		diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: lines(before), B: lines(after), FromFile: c.object + " (live)", ToFile: c.object + " (after the upgrade)", Context: 3})
		if err != nil {
			diff = fmt.Sprintf("(no diff: %v)\n", err)
		}
		if diff == "" {
			continue // alike as YAML: no change a person would see
		}
		out = append(out, upgrade.ObjectChange{Object: c.object, Action: action, Diff: diff})
	}
	return out
}

// serverMetadata are the fields of an object's metadata the API server
// keeps for itself: no chart sets them, no apply changes them.
var serverMetadata = []string{"creationTimestamp", "uid", "resourceVersion", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// shown is obj as a person compares it: no status, no metadata the
// server keeps for itself (serverMetadata), a Secret's values as the server stores
// them, redacted (marked changed where before, the live Secret, differs;
// before nil for the live side). nil for nil.
func shown(obj, before *unstructured.Unstructured) map[string]any {
	if obj == nil {
		return nil
	}
	out := obj.DeepCopy().Object
	delete(out, "status")
	if md, ok := out["metadata"].(map[string]any); ok {
		for _, k := range serverMetadata {
			delete(md, k)
		}
	}
	if isSecret(obj) {
		data := storedData(obj)
		var was map[string]any
		if before != nil {
			was = storedData(before)
		}
		for k, v := range data {
			if before != nil && !reflect.DeepEqual(was[k], v) {
				data[k] = provenance.Redacted + " (changed)"
			} else {
				data[k] = provenance.Redacted
			}
		}
		delete(out, "stringData")
		out["data"] = data
		if len(data) == 0 {
			delete(out, "data")
		}
	}
	return out
}

// storedData is a Secret's data as the API server stores it: its
// stringData folded into data, base64-encoded, over data's own keys.
func storedData(secret *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	if m, ok := secret.Object["data"].(map[string]any); ok {
		maps.Copy(out, m)
	}
	if m, ok := secret.Object["stringData"].(map[string]any); ok {
		for k, v := range m {
			str, _ := v.(string)
			out[k] = base64.StdEncoding.EncodeToString([]byte(str))
		}
	}
	return out
}

// lines is obj as YAML, line by line; nothing for nil.
func lines(obj map[string]any) []string {
	if obj == nil {
		return nil
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return []string{fmt.Sprintf("(not shown: %v)", err)}
	}
	return difflib.SplitLines(string(data))
}
