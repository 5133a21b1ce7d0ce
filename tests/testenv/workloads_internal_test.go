package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestCheckWorkloadAssets(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-scheduler"), nil, 0o755))
	err := checkWorkloadAssets(dir)
	require.ErrorContains(t, err, "needs kube-controller-manager, kwok, missing from")
	require.ErrorContains(t, err, dir)

	for _, bin := range workloadBinaries {
		require.NoError(t, os.WriteFile(filepath.Join(dir, bin), nil, 0o755))
	}
	require.NoError(t, checkWorkloadAssets(dir))
}

// The stages file and the Go constants name the same annotation and
// values, and each pod stage but pod-delete excludes deleted pods.
func TestKWOKStages(t *testing.T) {
	type expr struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	}
	type stage struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			ResourceRef struct {
				Kind string `json:"kind"`
			} `json:"resourceRef"`
			Selector struct {
				MatchExpressions []expr `json:"matchExpressions"`
			} `json:"selector"`
		} `json:"spec"`
	}
	holdKey := `.metadata.annotations["` + HoldAnnotation + `"]`
	names := map[string]bool{}
	holds := map[string]bool{}
	for doc := range strings.SplitSeq(string(kwokStages), "\n---\n") {
		var s stage
		require.NoError(t, yaml.Unmarshal([]byte(doc), &s), "a stage of kwok-stages.yaml")
		require.Equal(t, "Stage", s.Kind)
		require.False(t, names[s.Metadata.Name], "stage %s twice", s.Metadata.Name)
		names[s.Metadata.Name] = true
		if s.Spec.ResourceRef.Kind != "Pod" {
			continue
		}
		live := false // the stage excludes pods being deleted
		for _, e := range s.Spec.Selector.MatchExpressions {
			if e.Key == ".metadata.deletionTimestamp" {
				live = e.Operator == "DoesNotExist"
			}
			if strings.Contains(e.Key, "annotations") {
				require.Equal(t, holdKey, e.Key, "stage %s", s.Metadata.Name)
				for _, v := range e.Values {
					holds[v] = true
				}
			}
		}
		if s.Metadata.Name != "pod-delete" {
			require.True(t, live, "stage %s applies to pods being deleted", s.Metadata.Name)
		}
	}
	require.Equal(t, map[string]bool{HoldNotReady: true, HoldFail: true, HoldPull: true}, holds)
	require.Len(t, names, 7)
}
