package channel

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// MaxVersionLength is the longest version accepted: the longest image tag,
// since SUC tags the upgrade image with the version by default.
const MaxVersionLength = 128

// versionChars is what a version may hold: the characters of an image tag,
// not starting with '.' or '-'.
var versionChars = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// lastElement returns what follows the last '/' of a URL path: "" for a path
// that is empty or ends in '/'.
func lastElement(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}

// versionFromPath returns the version a URL path names, the way SUC reads
// it: its last element, with '+' turned into '-'. The result is checked with
// checkVersion.
func versionFromPath(path string, requireSemver bool) (string, error) {
	v := strings.ReplaceAll(lastElement(path), "+", "-")
	if err := checkVersion(v, requireSemver); err != nil {
		return "", err
	}
	return v, nil
}

// checkVersion refuses a version that cannot be an image tag: empty, longer
// than MaxVersionLength, holding spaces, '/' or other characters a tag
// cannot; and, when requireSemver is set, one that is not semver after an
// optional leading "v".
func checkVersion(v string, requireSemver bool) error {
	switch {
	case v == "":
		return errors.New("the version is empty (the path ends in '/')")
	case len(v) > MaxVersionLength:
		return fmt.Errorf("the version %.40q… is %d characters long, more than %d", v, len(v), MaxVersionLength)
	case !versionChars.MatchString(v):
		return fmt.Errorf("the version %q is not usable (want letters, digits, '_', '.' and '-', not starting with '.' or '-')", v)
	}
	if requireSemver {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v")); err != nil {
			return fmt.Errorf("the version %q is not semver: %w", v, err)
		}
	}
	return nil
}
