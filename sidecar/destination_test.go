package sidecar

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// destinationConfig returns a sidecar.properties text with the given
// destination.* lines.
func destinationConfig(t *testing.T, lines ...string) string {
	t.Helper()
	return fmt.Sprintf("local.broker.id=1\nlocal.bootstrap.servers=127.0.0.1:9094\ndata.dir=%s\nhttp.listener=127.0.0.1:0\nadmin.listener=127.0.0.1:0\nraft.listener=127.0.0.1:0\n%s\n",
		filepath.Join(t.TempDir(), "data"), strings.Join(lines, "\n"))
}

// TestDestinationConfigs loads each way of securing the destination client
// from a sidecar.properties text, as an operator writes it, and checks that
// the client options build (stores read, credentials in place) and that
// the effective configuration hides every secret.
func TestDestinationConfigs(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	_, cert := ca.issue(t, dir, "sidecar-1")
	stores := writeStores(t, dir, ca, cert)
	const scramPass, oauthSecret = "scram-secret", "oauth-secret"
	for _, tc := range []struct {
		name    string
		lines   []string
		secrets []string
	}{
		{"SASL_SSL SCRAM", []string{
			"destination.security.protocol=SASL_SSL", "destination.sasl.mechanism=SCRAM-SHA-512",
			`destination.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="sidemirror" password="` + scramPass + `";`,
			"destination.ssl.truststore.type=PEM", "destination.ssl.truststore.location=" + ca.file,
		}, []string{scramPass}},
		{"mTLS PKCS12", []string{
			"destination.security.protocol=SSL",
			"destination.ssl.keystore.type=PKCS12", "destination.ssl.keystore.location=" + stores.p12, "destination.ssl.keystore.password=" + storePass,
			"destination.ssl.truststore.type=PKCS12", "destination.ssl.truststore.location=" + stores.trustP12, "destination.ssl.truststore.password=" + storePass,
		}, []string{storePass}},
		{"mTLS JKS", []string{
			"destination.security.protocol=SSL",
			"destination.ssl.keystore.type=JKS", "destination.ssl.keystore.location=" + stores.jks, "destination.ssl.keystore.password=" + storePass,
			"destination.ssl.key.password=" + keyPass,
			"destination.ssl.truststore.type=JKS", "destination.ssl.truststore.location=" + stores.trustJKS, "destination.ssl.truststore.password=" + storePass,
		}, []string{storePass, keyPass}},
		{"mTLS encrypted PKCS#8 key", []string{
			"destination.security.protocol=SSL",
			"destination.ssl.keystore.location=" + stores.encrypted(t), "destination.ssl.key.password=" + keyPass,
			"destination.ssl.truststore.location=" + ca.file,
		}, []string{keyPass}},
		{"SASL_SSL OAUTHBEARER client credentials", []string{
			"destination.security.protocol=SASL_SSL", "destination.sasl.mechanism=OAUTHBEARER",
			"destination.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
			"destination.sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
			"destination.sasl.oauthbearer.token.endpoint.url=https://idp.example.com/oauth2/token",
			"destination.sasl.oauthbearer.client.credentials.client.id=sidemirror-sidecar",
			"destination.sasl.oauthbearer.client.credentials.client.secret=" + oauthSecret,
			"destination.sasl.oauthbearer.scope=kafka",
			"destination.ssl.truststore.location=" + ca.file,
		}, []string{oauthSecret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseText(t, destinationConfig(t, tc.lines...))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cfg.Destination.BootstrapServers, ","); got != "127.0.0.1:9094" {
				t.Errorf("destination bootstrap servers = %q, want local.bootstrap.servers", got)
			}
			if _, err := cfg.Destination.KgoOpts(); err != nil {
				t.Fatalf("KgoOpts: %v", err)
			}
			shown := cfg.String()
			for _, s := range tc.secrets {
				if strings.Contains(shown, s) {
					t.Errorf("the effective configuration shows the secret %q:\n%s", s, shown)
				}
			}
			for _, line := range tc.lines {
				key, _, _ := strings.Cut(line, "=")
				if !strings.Contains(shown, key+"=") {
					t.Errorf("the effective configuration lacks %s", key)
				}
			}
		})
	}
}

// TestDestinationKeyPasswordRefusedAtStart: stores are read when the
// sidecar starts; a wrong destination.ssl.key.password stops it there
// with a configuration error (exit code 2) naming that key.
func TestDestinationKeyPasswordRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	_, cert := ca.issue(t, dir, "sidecar-1")
	stores := writeStores(t, dir, ca, cert)
	cfg, err := parseText(t, destinationConfig(t, "destination.security.protocol=SSL",
		"destination.ssl.keystore.location="+stores.encrypted(t), "destination.ssl.key.password=not-"+keyPass,
		"destination.ssl.truststore.location="+ca.file))
	if err != nil {
		t.Fatalf("the configuration does not load: %v", err)
	}
	err = runErr(t, cfg)
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Run = %v, want a configuration error", err)
	}
	if !strings.Contains(err.Error(), "config: destination.ssl.key.password: does not decrypt the private key of destination.ssl.keystore.location") {
		t.Errorf("Run = %q, want it to name destination.ssl.key.password", err)
	}
	if strings.Contains(err.Error(), keyPass) {
		t.Errorf("the error shows the password: %q", err)
	}
}
