package managedchart

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Without spec.releaseName, Fleet deploys the release under the
// BundleDeployment's name, made a valid release name.
func TestTheReleaseFleetDeploys(t *testing.T) {
	for _, tc := range []struct{ spec, name, want string }{
		{"harvester", "harvester", "harvester"},
		{"", "harvester", "mcc-harvester"},
		{"", "rancher-monitoring-crd", "mcc-rancher-monitoring-crd"},
		{"", "a.b", "mcc-a-b-" + md5Hex("mcc-a.b", 8)},
		{"", "Web", "mcc-web-" + md5Hex("mcc-Web", 8)},
		{"", strings.Repeat("x", 60), "mcc-" + strings.Repeat("x", 43) + "-" + md5Hex("mcc-"+strings.Repeat("x", 60), 5)},
	} {
		mc := &ManagedChart{Name: tc.name, Chart: "chart", ReleaseName: tc.spec}
		got := mc.Release()
		assert.Equal(t, tc.want, got, "%+v", tc)
		assert.LessOrEqual(t, len(got), maxReleaseName)
	}
}
