package sidecar

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
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

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sidemirror-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

func TestKgoOpts(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir)
	certPEM, _ := os.ReadFile(certFile)
	keyPEM, _ := os.ReadFile(keyFile)
	keystore := filepath.Join(dir, "keystore.pem")
	if err := os.WriteFile(keystore, append(append([]byte{}, keyPEM...), certPEM...), 0o600); err != nil {
		t.Fatal(err)
	}

	base := DefaultClientConfig(DestinationPrefix)
	base.BootstrapServers = []string{"127.0.0.1:9092"}
	cases := []struct {
		name     string
		edit     func(c *ClientConfig)
		wantOpts int   // seed brokers + SASL + TLS
		wantErr  error // errors.Is target
	}{
		{"plaintext", func(c *ClientConfig) {}, 1, nil},
		{"sasl plain", func(c *ClientConfig) {
			c.SecurityProtocol = "SASL_PLAINTEXT"
			c.SASLJAASConfig = plainLoginModule + ` required username="u" password="p";`
		}, 2, nil},
		{"sasl scram over TLS with mTLS from a PEM key store", func(c *ClientConfig) {
			c.SecurityProtocol = "sasl_ssl"
			c.SASLMechanism = "SCRAM-SHA-256"
			c.SASLJAASConfig = scramLoginModule + ` required username="u" password="p";`
			c.SSLTruststoreLocation = certFile
			c.SSLKeystoreLocation = keystore
		}, 3, nil},
		{"TLS with inline PEM and no host name check", func(c *ClientConfig) {
			c.SecurityProtocol = "SSL"
			c.SSLTruststoreCertificates = string(certPEM)
			c.SSLKeystoreCertificateChain = string(certPEM)
			c.SSLKeystoreKey = string(keyPEM)
			c.SSLEndpointIdentificationAlgorithm = ""
		}, 2, nil},
		{"PKCS12 trust store", func(c *ClientConfig) {
			c.SecurityProtocol = "SSL"
			c.SSLTruststoreType = "PKCS12"
			c.SSLTruststoreLocation = filepath.Join(dir, "truststore.p12")
		}, 0, ErrNotSupported},
		{"encrypted key", func(c *ClientConfig) {
			c.SecurityProtocol = "SSL"
			c.SSLKeystoreCertificateChain = string(certPEM)
			c.SSLKeystoreKey = string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}}))
			c.SSLKeyPassword = "pw"
		}, 0, ErrNotSupported},
		{"OAUTHBEARER", func(c *ClientConfig) {
			c.SecurityProtocol = "SASL_SSL"
			c.SASLMechanism = "OAUTHBEARER"
			c.SASLJAASConfig = oauthBearerLoginModule + " required;"
		}, 0, ErrNotSupported},
		{"trust store file missing", func(c *ClientConfig) {
			c.SecurityProtocol = "SSL"
			c.SSLTruststoreLocation = filepath.Join(dir, "missing.pem")
		}, 0, ErrInvalidConfig},
		{"trust store without certificates", func(c *ClientConfig) {
			c.SecurityProtocol = "SSL"
			c.SSLTruststoreLocation = keyFile
		}, 0, ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			opts, err := c.KgoOpts()
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("KgoOpts error = %v, want %v", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is more than one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("KgoOpts: %v", err)
			}
			if len(opts) != tc.wantOpts {
				t.Errorf("KgoOpts returned %d options, want %d", len(opts), tc.wantOpts)
			}
		})
	}
}

func TestClientConfigRedacted(t *testing.T) {
	c := DefaultClientConfig("source.")
	c.SASLJAASConfig = `x required password="hunter2";`
	c.SSLKeystoreKey = "-----BEGIN PRIVATE KEY-----"
	c.SSLKeyPassword = "hunter2"
	c.SSLTruststoreCertificates = "-----BEGIN CERTIFICATE-----"
	got := map[string]string{}
	for _, p := range c.Redacted() {
		got[p.Key] = p.Value
	}
	for k, want := range map[string]string{
		"source.sasl.jaas.config":            "[hidden]",
		"source.ssl.keystore.key":            "[hidden]",
		"source.ssl.key.password":            "[hidden]",
		"source.ssl.keystore.password":       "",
		"source.ssl.truststore.certificates": "[PEM, 27 bytes]",
		"source.security.protocol":           "PLAINTEXT",
	} {
		if got[k] != want {
			t.Errorf("Redacted %s = %q, want %q", k, got[k], want)
		}
	}
}
