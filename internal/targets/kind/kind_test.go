package kind

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNames(t *testing.T) {
	d := Descriptor{Name: "helmchart", Spelling: "HelmChart"}
	legacy := Descriptor{Name: "managedchart", Spelling: "ManagedChart", Legacy: true}
	assert.Equal(t, "chart-upgrader-helmchart-traefik", d.LeaseName("traefik"))
	assert.Equal(t, "chart-upgrader-harvester", legacy.LeaseName("harvester"), "the first kind keeps its Lease name")
	assert.Equal(t, "chart-upgrader-backup-helmchart-app-1.2.3-rke2r1", d.BackupName("app", "1.2.3+RKE2R1"))
	assert.Equal(t, "chart-upgrader-backup-managedchart-app-1.0.0", legacy.BackupName("app", "1.0.0"), "new backups carry the kind")
	assert.Equal(t, "chart-upgrader-backup-app-1.0.0", legacy.LegacyBackupName("app", "1.0.0"))
	assert.Empty(t, d.LegacyBackupName("app", "1.0.0"))

	long := d.LeaseName(strings.Repeat("x", 300))
	assert.Len(t, long, 253)
	assert.True(t, strings.HasPrefix(long, "chart-upgrader-helmchart-xxx"))
	// a cut never ends in '-' or '.'
	cutAtDash := d.BackupName(strings.Repeat("a", 253-len("chart-upgrader-backup-helmchart-")-1), "1.0.0")
	assert.False(t, strings.HasSuffix(cutAtDash, "-"), cutAtDash)
}

func TestSanitize(t *testing.T) {
	assert.Equal(t, "v1.2.3-rc.1-build-7", Sanitize("V1.2.3-rc.1+build_7"))
}

func TestSet(t *testing.T) {
	s := Set{
		{Name: "managedchart", Spelling: "ManagedChart"},
		{Name: "release", Spelling: "Release", Options: &Options{Field: "release"}},
	}
	d, ok := s.Lookup("MANAGEDCHART")
	assert.True(t, ok)
	assert.Equal(t, "managedchart", d.Name)
	d, ok = s.Lookup("Release")
	assert.True(t, ok)
	assert.Equal(t, "release", d.Name)
	_, ok = s.Lookup("bundle")
	assert.False(t, ok)
	assert.Equal(t, []string{"managedchart", "release"}, s.Names())
	assert.Equal(t, []string{"ManagedChart", "Release"}, s.Spellings())
	assert.Equal(t, []string{"release"}, s.OptionFields())
	owner, ok := s.OwnerOf("release")
	assert.True(t, ok)
	assert.Equal(t, "release", owner.Name)
	_, ok = s.OwnerOf("helmchart")
	assert.False(t, ok)
}

func TestOr(t *testing.T) {
	assert.Equal(t, "", Or(nil))
	assert.Equal(t, "a", Or([]string{"a"}))
	assert.Equal(t, "a or b", Or([]string{"a", "b"}))
	assert.Equal(t, "a, b or c", Or([]string{"a", "b", "c"}))
}

func TestOptionsOr(t *testing.T) {
	type opts struct{ N int }
	assert.Equal(t, opts{N: 2}, OptionsOr(any(opts{N: 2}), opts{N: 1}))
	assert.Equal(t, opts{N: 1}, OptionsOr(nil, opts{N: 1}), "none given: the default")
	assert.Equal(t, opts{N: 1}, OptionsOr(any("other kind's"), opts{N: 1}))
}

// serverSide decides as Helm's upgrade does: true and false say so, auto
// (or nothing) keeps what the release recorded; no record is client-side.
func TestServerSide(t *testing.T) {
	for _, c := range []struct {
		setting, recorded string
		want              bool
	}{
		{ServerSideTrue, "", true}, {ServerSideTrue, "csa", true},
		{ServerSideFalse, "ssa", false},
		{ServerSideAuto, "ssa", true}, {ServerSideAuto, "csa", false}, {ServerSideAuto, "", false},
		{"", "ssa", true},
	} {
		assert.Equal(t, c.want, ServerSide(c.setting, c.recorded), "%q with %q recorded", c.setting, c.recorded)
	}
}
