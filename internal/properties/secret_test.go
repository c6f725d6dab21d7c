package properties

import "testing"

func TestIsSecret(t *testing.T) {
	for key, want := range map[string]bool{
		"sasl.jaas.config":                    true,
		"destination.sasl.jaas.config":        true,
		"ssl.keystore.password":               true,
		"ssl.key.password":                    true,
		"ssl.truststore.password":             true,
		"ssl.keystore.key":                    true,
		"SSL.KEYSTORE.KEY":                    true,
		"bootstrap.servers":                   false,
		"ssl.keystore.location":               false,
		"ssl.keystore.certificate.chain":      false,
		"ssl.truststore.certificates":         false,
		"sasl.mechanism":                      false,
		"mirror.metadata.refresh.interval.ms": false,
	} {
		if got := IsSecret(key); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", key, got, want)
		}
	}
}
