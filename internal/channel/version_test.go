package channel

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionFromLocation(t *testing.T) {
	base, err := url.Parse("https://channels.example.com/v1/channels/stable?x=1")
	require.NoError(t, err)
	tests := []struct {
		location, want, err string
		semver              bool
	}{
		{location: "https://other.example.com/releases/v1.2.3", want: "v1.2.3"},
		{location: "/releases/v1.2.3?arch=arm64#top", want: "v1.2.3"},
		{location: "../releases/1.4.2", want: "1.4.2"},
		{location: "1.4.2", want: "1.4.2"}, // relative to the channel's directory
		{location: "/r/v1.30.2+rke2r1", want: "v1.30.2-rke2r1"},
		{location: "/r/v1.2.3", want: "v1.2.3", semver: true},
		{location: "/r/1.2.3-rc.1", want: "1.2.3-rc.1", semver: true},
		{location: "", err: "no Location header"},
		{location: "/r/", err: "empty"},
		{location: "?only=query", want: "stable"}, // the channel URL itself
		{location: "/r/a%20b", err: "not usable"},
		{location: "/r/" + strings.Repeat("x", 129), err: "more than 128"},
		{location: "/r/" + strings.Repeat("x", 128), want: strings.Repeat("x", 128)},
		{location: "/r/1.2", err: "not semver", semver: true},
		{location: "/r/stable", err: "not semver", semver: true},
		{location: "http://[::1", err: "location"},
	}
	for _, tt := range tests {
		got, err := versionFromLocation(base, tt.location, tt.semver)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, "%q", tt.location)
			continue
		}
		require.NoError(t, err, "%q", tt.location)
		assert.Equal(t, tt.want, got, "%q", tt.location)
	}
}

func FuzzVersionFromLocation(f *testing.F) {
	for _, seed := range []string{
		"https://x/releases/v1.2.3", "/r/1.2.3+k3s1", "../a/b/", "", "%zz", "/r/%2F",
		"http://[::1]:80/v", "//host/only", "/r/" + strings.Repeat("9", 200), "?q#f", "a b",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	base, _ := url.Parse("https://channels.example.com/v1/channels/stable")
	f.Fuzz(func(t *testing.T, location string, semver bool) {
		v, err := versionFromLocation(base, location, semver)
		if err != nil {
			return
		}
		if v == "" || len(v) > MaxVersionLength || strings.ContainsAny(v, "/+ \t\n") {
			t.Fatalf("versionFromLocation(%q) = %q: not a usable version", location, v)
		}
		if err := checkVersion(v, semver); err != nil {
			t.Fatalf("versionFromLocation(%q) = %q, which checkVersion refuses: %v", location, v, err)
		}
	})
}
