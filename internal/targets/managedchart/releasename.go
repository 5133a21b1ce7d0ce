package managedchart

import (
	"crypto/md5" //nolint:gosec // Fleet's naming, not a security use
	"encoding/hex"
	"regexp"
	"strings"
)

// The Helm release name Fleet's agent deploys a BundleDeployment as when
// its options name none (the ManagedChart has no spec.releaseName): the
// BundleDeployment's name, mcc-<name>, made a valid release name as
// Fleet v0.16 makes it (internal/names.HelmReleaseName): a name with
// upper case or characters other than letters, digits and dashes gets a
// checksum, is lower-cased and cleaned, and is cut to 53 characters
// with a hash.
func fleetReleaseName(bundleDeployment string) string {
	s := strings.ReplaceAll(bundleDeployment, "/", "-")
	if s != strings.ToLower(s) || disallowed.MatchString(s) {
		s += "-" + md5Hex(s, 8)
	}
	s = strings.ToLower(s)
	s = disallowed.ReplaceAllLiteralString(s, "-")
	s = multiDash.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if helmReleaseName.MatchString(s) && dnsLabel.MatchString(s) {
		return limitName(s, maxReleaseName)
	}
	return md5Hex(bundleDeployment, 24)
}

// maxReleaseName is the longest Helm release name Fleet writes.
const maxReleaseName = 53

var (
	disallowed      = regexp.MustCompile(`[^a-zA-Z0-9-]+`)
	helmReleaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	dnsLabel        = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	multiDash       = regexp.MustCompile("-+")
)

// limitName cuts s to count characters, the last six a dash and a hash
// of s (the dash left out when the cut already ends in one).
func limitName(s string, count int) string {
	if len(s) <= count {
		return s
	}
	const hexLen = 5
	keep := count - hexLen - 1
	sep := "-"
	if s[keep-1] == '-' {
		sep = ""
	}
	return s[:keep] + sep + md5Hex(s, hexLen)
}

func md5Hex(s string, n int) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // Fleet's naming
	return hex.EncodeToString(sum[:])[:n]
}
