package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseJAAS(t *testing.T) {
	j, err := parseJAAS(`  org.apache.kafka.common.security.scram.ScramLoginModule required
		username="alice" password="p\"w;d" tokenauth=true ;  `)
	if err != nil {
		t.Fatal(err)
	}
	if j.module != scramLoginModule || j.flag != "required" ||
		j.options["username"] != "alice" || j.options["password"] != `p"w;d` || j.options["tokenauth"] != "true" {
		t.Errorf("parseJAAS = %+v", j)
	}
	for _, bad := range []string{
		"",
		"org.Foo",
		"org.Foo required",
		"org.Foo mandatory a=b;",
		`org.Foo required a="b;`,
		"org.Foo required a b;",
		"org.Foo required a=;",
		"org.Foo required a=b; org.Bar required;",
		"org.Foo required a=b a=c;",
	} {
		if _, err := parseJAAS(bad); err == nil {
			t.Errorf("parseJAAS(%q) succeeded, want an error", bad)
		} else if strings.Contains(err.Error(), "org.") {
			t.Errorf("parseJAAS(%q) error %q echoes the input", bad, err)
		}
	}
}

// dialTLS runs a TLS server with cfg on loopback and reports whether a
// client with clientCfg completes the handshake.
func dialTLS(t *testing.T, serverCfg, clientCfg *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		done <- c.(*tls.Conn).Handshake()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), clientCfg)
	if err == nil {
		err = c.Handshake()
		c.Close()
	}
	if serr := <-done; err == nil {
		err = serr
	}
	return err
}

func TestClientStores(t *testing.T) {
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "broker"})
	cliCert, cliKey := ca.issue(t, pkix.Name{CommonName: "sidemirror"})
	serverCfg := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    mustPool(t, ca),
	}
	enc := encryptedKeyPEM(t, cliKey, "key-pass", "aes-256-cbc")
	enc3des := encryptedKeyPEM(t, cliKey, "key-pass", "des3")
	cases := []struct {
		name   string
		stores SSLStores
	}{
		{"PEM files, types detected", SSLStores{
			TruststoreLocation: ca.pemTruststore(t),
			KeystoreLocation:   ca.pemKeystore(t, "ks.pem", cliCert, cliKey),
		}},
		{"inline PEM", SSLStores{
			TruststoreCertificates: string(certPEM(ca.cert)), TruststoreType: "PEM",
			KeystoreCertificateChain: string(certPEM(cliCert)), KeystoreKey: string(keyPEM(t, cliKey)),
		}},
		{"PKCS12 stores", SSLStores{
			TruststoreLocation: ca.pkcs12Truststore(t, "trust-pass"), TruststoreType: "PKCS12", TruststorePassword: "trust-pass",
			KeystoreLocation: ca.pkcs12Keystore(t, "ks.p12", cliCert, cliKey, "store-pass"), KeystoreType: "pkcs12", KeystorePassword: "store-pass",
		}},
		{"JKS stores, types detected", SSLStores{
			TruststoreLocation: ca.jksTruststore(t, "trust-pass"), TruststorePassword: "trust-pass",
			KeystoreLocation: ca.jksKeystore(t, "ks.jks", cliCert, cliKey, "store-pass", "store-pass"), KeystorePassword: "store-pass",
		}},
		{"JKS key entry with its own password", SSLStores{
			TruststoreLocation: ca.pemTruststore(t),
			KeystoreLocation:   ca.jksKeystore(t, "ks2.jks", cliCert, cliKey, "store-pass", "key-pass"), KeystoreType: "JKS",
			KeystorePassword: "store-pass", KeyPassword: "key-pass",
		}},
		{"encrypted PKCS#8 key file (AES-256)", SSLStores{
			TruststoreLocation: ca.pemTruststore(t),
			KeystoreLocation:   ca.write(t, "enc.pem", append(append([]byte{}, enc...), certPEM(cliCert)...)),
			KeyPassword:        "key-pass",
		}},
		{"encrypted inline PKCS#8 key (DES-EDE3)", SSLStores{
			TruststoreLocation:       ca.pemTruststore(t),
			KeystoreCertificateChain: string(certPEM(cliCert)), KeystoreKey: string(enc3des), KeyPassword: "key-pass",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultClientConfig("destination.")
			c.BootstrapServers = []string{"127.0.0.1:9092"}
			c.SecurityProtocol = "SSL"
			c.SSL = tc.stores
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			cfg, err := c.TLSConfig()
			if err != nil {
				t.Fatalf("TLSConfig: %v", err)
			}
			cfg.ServerName = "localhost"
			if err := dialTLS(t, serverCfg, cfg); err != nil {
				t.Fatalf("mutual TLS handshake failed: %v", err)
			}
			if opts, err := c.KgoOpts(); err != nil || len(opts) != 2 {
				t.Errorf("KgoOpts = %d options, %v; want seed brokers and TLS", len(opts), err)
			}
		})
	}
}

func mustPool(t *testing.T, ca *testCA) *x509.CertPool {
	t.Helper()
	p, err := SSLStores{TruststoreCertificates: string(certPEM(ca.cert))}.TrustPool("")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClientStoreErrors(t *testing.T) {
	ca := newTestCA(t)
	cliCert, cliKey := ca.issue(t, pkix.Name{CommonName: "sidemirror"})
	other, otherKey := ca.issue(t, pkix.Name{CommonName: "other"})
	_ = other
	enc := encryptedKeyPEM(t, cliKey, "key-pass", "aes-128-cbc")
	p12 := ca.pkcs12Keystore(t, "ks.p12", cliCert, cliKey, "store-pass")
	jks := ca.jksKeystore(t, "ks.jks", cliCert, cliKey, "store-pass", "store-pass")
	cases := []struct {
		name     string
		stores   SSLStores
		wantKey  string
		wantText string
	}{
		{"wrong PKCS12 password", SSLStores{KeystoreLocation: p12, KeystorePassword: "nope"}, "ssl.keystore.location", "wrong password"},
		{"wrong JKS password", SSLStores{KeystoreLocation: jks, KeystorePassword: "nope"}, "ssl.keystore.location", "ssl.keystore.password"},
		{"PKCS12 without password", SSLStores{KeystoreLocation: p12, KeystoreType: "PKCS12"}, "ssl.keystore.password", "is missing"},
		{"wrong key password", SSLStores{KeystoreCertificateChain: string(certPEM(cliCert)), KeystoreKey: string(enc), KeyPassword: "nope"}, "ssl.key.password", "does not decrypt the private key of source.ssl.keystore.key (a wrong password"},
		{"encrypted key without password", SSLStores{KeystoreCertificateChain: string(certPEM(cliCert)), KeystoreKey: string(enc)}, "ssl.key.password", "is encrypted"},
		{"password for a plain key", SSLStores{KeystoreCertificateChain: string(certPEM(cliCert)), KeystoreKey: string(keyPEM(t, cliKey)), KeyPassword: "x"}, "ssl.key.password", "not encrypted"},
		{"key of another certificate", SSLStores{KeystoreCertificateChain: string(certPEM(cliCert)), KeystoreKey: string(keyPEM(t, otherKey))}, "ssl.keystore.key", "does not belong"},
		{"legacy encrypted PEM", SSLStores{KeystoreCertificateChain: string(certPEM(cliCert)), KeystoreKey: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: []byte{1}}))}, "ssl.keystore.key", "pkcs8 -topk8"},
		{"missing trust store", SSLStores{TruststoreLocation: filepath.Join(ca.dir, "missing.pem")}, "ssl.truststore.location", "cannot read"},
		{"trust store without certificates", SSLStores{TruststoreLocation: ca.write(t, "key-only.pem", keyPEM(t, cliKey))}, "ssl.truststore.location", "no trusted certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultClientConfig("source.")
			c.SecurityProtocol = "SSL"
			c.SSL = tc.stores
			err := c.Validate()
			if err == nil {
				_, err = c.TLSConfig()
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error = %v, want a *ConfigError", err)
			}
			if ce.Key != "source."+tc.wantKey || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error = %q, want key source.%s and %q", err, tc.wantKey, tc.wantText)
			}
			for _, secret := range []string{"store-pass", "key-pass", "nope"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a password", err)
				}
			}
		})
	}
}

func TestValidateSASL(t *testing.T) {
	const (
		plainJAAS = plainLoginModule + ` required username="u" password="p";`
		oauthJAAS = oauthBearerLoginModule + ` required;`
	)
	cases := []struct {
		name         string
		edit         func(c *ClientConfig)
		wantKey      string // "" for valid
		notSupported bool
	}{
		{"plain", func(c *ClientConfig) { c.SASLJAASConfig = plainJAAS }, "", false},
		{"GSSAPI", func(c *ClientConfig) {
			c.SASLMechanism, c.SASLJAASConfig = "GSSAPI", "com.sun.security.auth.module.Krb5LoginModule required;"
		}, "sasl.mechanism", true},
		{"oauth with keys", func(c *ClientConfig) {
			c.SASLMechanism, c.SASLJAASConfig = "OAUTHBEARER", oauthJAAS
			c.TokenEndpointURL, c.OAuthClientID, c.OAuthClientSecret = "https://idp.example/token", "id", "s"
		}, "", false},
		{"oauth with JAAS options", func(c *ClientConfig) {
			c.SASLMechanism = "OAUTHBEARER"
			c.SASLJAASConfig = oauthBearerLoginModule + ` required clientId="id" clientSecret="s" scope="kafka";`
			c.TokenEndpointURL = "http://127.0.0.1:1/token"
			c.LoginCallbackHandlerClass = loginCallbackHandlers[0]
		}, "", false},
		{"oauth from a token file", func(c *ClientConfig) {
			c.SASLMechanism, c.SASLJAASConfig, c.TokenEndpointURL = "OAUTHBEARER", oauthJAAS, "file:/run/token"
		}, "", false},
		{"oauth without endpoint (unsecured tokens)", func(c *ClientConfig) {
			c.SASLMechanism, c.SASLJAASConfig = "OAUTHBEARER", oauthJAAS
		}, "sasl.oauthbearer.token.endpoint.url", true},
		{"oauth with another login handler", func(c *ClientConfig) {
			c.SASLMechanism, c.SASLJAASConfig = "OAUTHBEARER", oauthJAAS
			c.TokenEndpointURL, c.OAuthClientID, c.OAuthClientSecret = "https://idp.example/token", "id", "s"
			c.LoginCallbackHandlerClass = "com.example.MyHandler"
		}, "sasl.login.callback.handler.class", true},
		{"oauth without client secret", func(c *ClientConfig) {
			c.SASLMechanism, c.SASLJAASConfig = "OAUTHBEARER", oauthJAAS
			c.TokenEndpointURL, c.OAuthClientID = "https://idp.example/token", "id"
		}, "sasl.oauthbearer.client.credentials.client.secret", false},
		{"oauth endpoint not a URL", func(c *ClientConfig) {
			c.SASLMechanism, c.SASLJAASConfig = "OAUTHBEARER", oauthJAAS
			c.TokenEndpointURL, c.OAuthClientID, c.OAuthClientSecret = "idp.example/token", "id", "s"
		}, "sasl.oauthbearer.token.endpoint.url", false},
		{"oauth key with PLAIN", func(c *ClientConfig) {
			c.SASLJAASConfig, c.TokenEndpointURL = plainJAAS, "https://idp.example/token"
		}, "sasl.oauthbearer.token.endpoint.url", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultClientConfig("destination.")
			c.SecurityProtocol = "SASL_SSL"
			tc.edit(&c)
			err := c.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != "destination."+tc.wantKey {
				t.Fatalf("Validate = %v, want an error for destination.%s", err, tc.wantKey)
			}
			if errors.Is(err, ErrNotSupported) != tc.notSupported {
				t.Errorf("errors.Is(%v, ErrNotSupported) = %v, want %v", err, !tc.notSupported, tc.notSupported)
			}
		})
	}
}

// fakeJWT returns an unsigned token with the claims; the client does not
// verify tokens, the broker does.
func fakeJWT(claims map[string]any) string {
	b, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(b) + "."
}

func TestTokenSourceClientCredentials(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		user, pass, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || user != "my+client" || pass != "s%3Acret" ||
			r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "kafka" {
			http.Error(w, "bad client", http.StatusUnauthorized)
			return
		}
		exp := time.Now().Add(time.Hour).Unix()
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, fakeJWT(map[string]any{"sub": "svc", "exp": exp}))
	}))
	defer srv.Close()

	ts := newTokenSource(srv.URL, "my client", "s:cret", "kafka")
	now := time.Now()
	ts.now = func() time.Time { return now }
	tok, err := ts.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if claims, ok := JWTClaims(tok); !ok || claims["sub"] != "svc" {
		t.Errorf("token claims = %v", claims)
	}
	if _, err := ts.Token(context.Background()); err != nil || calls.Load() != 1 {
		t.Errorf("second Token: err %v, %d endpoint calls; want the cached token", err, calls.Load())
	}
	now = now.Add(49 * time.Minute) // past 80% of the hour
	if _, err := ts.Token(context.Background()); err != nil || calls.Load() != 2 {
		t.Errorf("Token after 49 minutes: err %v, %d endpoint calls; want a refresh", err, calls.Load())
	}

	bad := newTokenSource(srv.URL, "my client", "wrong-secret", "kafka")
	_, err = bad.Token(context.Background())
	if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("Token with a wrong secret: %v", err)
	}

	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(fakeJWT(map[string]any{"sub": "f"})+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := newTokenSource("file:"+file, "", "", "").Token(context.Background()); err != nil || strings.HasSuffix(tok, "\n") {
		t.Errorf("token from file = %q, %v", tok, err)
	}
}

func TestClientConfigRedacted(t *testing.T) {
	c := DefaultClientConfig("source.")
	c.SASLJAASConfig = `x required password="hunter2";`
	c.SSL.KeystoreKey = "-----BEGIN PRIVATE KEY-----"
	c.SSL.KeyPassword = "hunter2"
	c.SSL.TruststoreCertificates = "-----BEGIN CERTIFICATE-----"
	c.OAuthClientSecret = "hunter2"
	got := map[string]string{}
	for _, p := range c.Redacted() {
		got[p.Key] = p.Value
	}
	for k, want := range map[string]string{
		"source.sasl.jaas.config":                                  "[hidden]",
		"source.ssl.keystore.key":                                  "[hidden]",
		"source.ssl.key.password":                                  "[hidden]",
		"source.sasl.oauthbearer.client.credentials.client.secret": "[hidden]",
		"source.ssl.keystore.password":                             "",
		"source.ssl.truststore.certificates":                       "[PEM, 27 bytes]",
		"source.security.protocol":                                 "PLAINTEXT",
	} {
		if got[k] != want {
			t.Errorf("Redacted %s = %q, want %q", k, got[k], want)
		}
	}
	if len(got) != len(ClientKeys) {
		t.Errorf("Redacted has %d keys, want %d", len(got), len(ClientKeys))
	}
}
