package properties

import "strings"

// Hidden is what is shown in place of a secret value.
const Hidden = "[hidden]"

// IsSecret reports whether a Kafka config key holds a secret that must never
// be printed or logged: passwords, secrets (such as OAuth client secrets),
// JAAS configs (which carry credentials) and PEM private keys. Keys are
// compared without regard to case.
func IsSecret(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "jaas.config") || strings.Contains(k, "keystore.key")
}
