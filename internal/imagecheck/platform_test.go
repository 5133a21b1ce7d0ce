package imagecheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/registries"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// An image's platforms are matched as containerd matches them on a node
// (platforms.Only of the node's os/arch, normalized): an amd64 node runs
// 386, an arm64 node arm/v8 to arm/v5, an arm (v7) node arm/v7 to arm/v5.
func TestMissingPlatformsAsContainerd(t *testing.T) {
	for _, c := range []struct {
		name  string
		node  string
		have  []string
		match bool
	}{
		{"a 386 image on an amd64 node", "linux/amd64", []string{"linux/386"}, true},
		{"an arm/v7 image on an arm64 node", "linux/arm64", []string{"linux/arm/v7"}, true},
		{"an arm/v5 image on an arm64 node", "linux/arm64", []string{"linux/arm/v5"}, true},
		{"an arm/v7 image on an arm node (v7 by default)", "linux/arm", []string{"linux/arm/v7"}, true},
		{"an arm image (v7 unsaid) on an arm node", "linux/arm", []string{"linux/arm"}, true},
		{"an arm/v6 image on an arm node", "linux/arm", []string{"linux/arm/v6"}, true},
		{"an arm/v8 image on an arm (v7) node", "linux/arm", []string{"linux/arm/v8"}, false},
		{"an arm64 image on an arm node", "linux/arm", []string{"linux/arm64"}, false},
		{"an index holding only arm64/v8 on an arm64 node", "linux/arm64", []string{"linux/arm64/v8"}, true},
		{"an index holding arm64 and an attestation on an arm64 node", "linux/arm64", []string{"unknown/unknown", "linux/arm64"}, true},
		{"an arm64 image on an amd64 node", "linux/amd64", []string{"linux/arm64"}, false},
		{"a windows amd64 image on a linux amd64 node", "linux/amd64", []string{"windows/amd64"}, false},
		{"an amd64 image on a 386 node", "linux/386", []string{"linux/amd64"}, false},
		{"an amd64 image on an amd64 node", "linux/amd64", []string{"linux/amd64"}, true},
		{"a platform that does not parse matches nothing", "linux/amd64", []string{"/amd64", "linux/", "linux/amd64/v1/x"}, false},
		{"a node without its arch matches nothing", "linux/", []string{"linux/amd64"}, false},
	} {
		var want []string
		if !c.match {
			want = []string{c.node}
		}
		assert.Equal(t, want, missingPlatforms([]string{c.node}, c.have), c.name)
	}
	assert.Equal(t, []string{"linux/386", "windows/amd64"},
		missingPlatforms([]string{"linux/386", "linux/amd64", "linux/arm64", "windows/amd64"}, []string{"linux/arm/v7", "linux/amd64"}),
		"each node platform is matched on its own; the missing are named as the nodes report them")
}

// The verdict takes the same match: an index of 386 and arm/v7 serves
// amd64 and arm64 nodes; one of 386 only leaves the arm64 node out, named
// as before.
func TestJudgeCompatiblePlatforms(t *testing.T) {
	nodes := []corev1.Node{node("amd-1", "amd64", nil), node("arm-1", "arm64", nil)}
	img, err := registries.ParseImage("registry.example.com/app:1")
	require.NoError(t, err)
	judged := func(ps ...string) upgrade.ImageCheck {
		a := Answer{Found: true, Index: true, Platforms: ps}
		return judge([]*pull{{image: img, uses: []Use{{Where: "Deployment demo/app, container app", Image: img.Written, Pod: &corev1.PodSpec{}, Namespace: "demo"}},
			pulled: Pulled{Tried: []Answer{a}, Found: &a}}}, nodes)
	}
	out := judged("linux/386", "linux/arm/v7")
	assert.Empty(t, out.Refused)
	assert.Equal(t, "pullable", out.Images[0].Verdict)
	assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, out.Images[0].NodePlatforms)

	out = judged("linux/386")
	require.Len(t, out.Refused, 1)
	assert.Contains(t, out.Refused[0], "has no linux/arm64 for the nodes its pods may run on (arm-1, at")
	assert.Contains(t, out.Refused[0], "its index holds linux/386")
}
