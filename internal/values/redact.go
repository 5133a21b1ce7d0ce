package values

import (
	"regexp"
)

// secretKey matches keys whose values reports must not show.
var secretKey = regexp.MustCompile(`(?i)(password|passwd|passphrase|secret|token|key|cert|credential|private|auth)`)

// secretPath reports whether any key on the path looks secret.
func secretPath(keys []string) bool {
	for _, k := range keys {
		if secretKey.MatchString(k) {
			return true
		}
	}
	return false
}

// holdsSecret reports whether a value holds a secret-looking key anywhere
// below it (maps inside lists included).
func holdsSecret(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if secretKey.MatchString(k) || holdsSecret(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsSecret(e) {
				return true
			}
		}
	}
	return false
}

// show formats a value for a message, redacted when secret.
func show(v any, secret bool) string {
	if secret {
		return Redaction
	}
	return Format(v, 60)
}
