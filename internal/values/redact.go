package values

import "strings"

// secretWords mark a key whose value reports must not show.
var secretWords = []string{"password", "passwd", "passphrase", "secret", "token", "key", "cert",
	"credential", "private", "auth"}

// isSecretKey reports whether a path key looks secret (case-insensitive
// substring: "tls.key", "caCert", "adminPassword", "apiToken").
func isSecretKey(k string) bool {
	l := strings.ToLower(k)
	for _, w := range secretWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// LooksSecret reports whether text mentions a secret-looking key: one of the
// words that make reports redact a value (password, token, key, cert, auth,
// …), case-insensitively.
func LooksSecret(text string) bool { return isSecretKey(text) }

// secretKey caches isSecretKey per key: the same keys recur on every path.
func (m *merger) secretKey(k string) bool {
	v, ok := m.secretKeys[k]
	if !ok {
		v = isSecretKey(k)
		m.secretKeys[k] = v
	}
	return v
}

// holdsSecret reports whether a value holds a secret-looking key anywhere
// below it (maps inside lists included). A key named exactly "key" inside a
// value is not counted: lists of tolerations and selectors use it for label
// keys.
func holdsSecret(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if (k != "key" && isSecretKey(k)) || holdsSecret(e) {
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
