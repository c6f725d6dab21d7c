package sidecar

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestDestinationProblem connects destination clients built from
// destination.* properties to kfake brokers that refuse them (a wrong SCRAM
// password; no client certificate where one is required; nothing
// listening) and checks what checkDestination logs: one error line saying
// what is wrong and naming the keys, never the secret; and, with the right
// settings, that the local broker is reachable.
func TestDestinationProblem(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	_, brokerCert := ca.issue(t, dir, "broker")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	clientPEM, clientCert := ca.issue(t, dir, "sidecar-1")
	stores := writeStores(t, dir, ca, clientCert)

	scram, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "sidemirror", "right-secret"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{brokerCert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(scram.Close)
	mtls, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{brokerCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mtls.Close)

	jaas := func(pw string) string {
		return `org.apache.kafka.common.security.scram.ScramLoginModule required username="sidemirror" password="` + pw + `";`
	}
	cases := []struct {
		name      string
		bootstrap string
		props     map[string]string
		want      string // in the logged line; "" = reachable
	}{
		{"SASL_SSL SCRAM", scram.ListenAddrs()[0], map[string]string{
			"destination.security.protocol": "SASL_SSL", "destination.sasl.mechanism": "SCRAM-SHA-512",
			"destination.sasl.jaas.config": jaas("right-secret"), "destination.ssl.truststore.location": ca.file,
		}, ""},
		{"SASL_SSL SCRAM, wrong password", scram.ListenAddrs()[0], map[string]string{
			"destination.security.protocol": "SASL_SSL", "destination.sasl.mechanism": "SCRAM-SHA-512",
			"destination.sasl.jaas.config": jaas("wrong-secret"), "destination.ssl.truststore.location": ca.file,
		}, "the local broker closed the connection while this sidecar connected and authenticated: check that local.bootstrap.servers names the broker's SASL_SSL listener, the credentials in destination.sasl.jaas.config"}, // kfake hangs up; Kafka answers SASL_AUTHENTICATION_FAILED

		{"mTLS", mtls.ListenAddrs()[0], map[string]string{
			"destination.security.protocol": "SSL", "destination.ssl.keystore.location": clientPEM,
			"destination.ssl.truststore.location": ca.file,
		}, ""},
		{"mTLS with PKCS12 stores", mtls.ListenAddrs()[0], map[string]string{
			"destination.security.protocol":     "SSL",
			"destination.ssl.keystore.type":     "PKCS12",
			"destination.ssl.keystore.location": stores.p12, "destination.ssl.keystore.password": storePass,
			"destination.ssl.truststore.type":     "PKCS12",
			"destination.ssl.truststore.location": stores.trustP12, "destination.ssl.truststore.password": storePass,
		}, ""},
		{"mTLS with JKS stores", mtls.ListenAddrs()[0], map[string]string{
			"destination.security.protocol":     "SSL",
			"destination.ssl.keystore.type":     "JKS",
			"destination.ssl.keystore.location": stores.jks, "destination.ssl.keystore.password": storePass,
			"destination.ssl.key.password":        keyPass,
			"destination.ssl.truststore.type":     "JKS",
			"destination.ssl.truststore.location": stores.trustJKS, "destination.ssl.truststore.password": storePass,
		}, ""},
		{"mTLS with an encrypted PKCS#8 key", mtls.ListenAddrs()[0], map[string]string{
			"destination.security.protocol":     "SSL",
			"destination.ssl.keystore.location": stores.encrypted(t), "destination.ssl.key.password": keyPass,
			"destination.ssl.truststore.location": ca.file,
		}, ""},
		{"mTLS without a key store", mtls.ListenAddrs()[0], map[string]string{
			"destination.security.protocol": "SSL", "destination.ssl.truststore.location": ca.file,
		}, "the TLS handshake with the local broker failed: check destination.ssl.truststore.*"},
		{"TLS with a trust store that lacks the broker's CA", mtls.ListenAddrs()[0], map[string]string{
			"destination.security.protocol": "SSL", "destination.ssl.keystore.location": clientPEM,
			"destination.ssl.truststore.location": clientPEM, // a leaf, not the CA
		}, "the TLS handshake with the local broker failed"},
		{"nothing listening", freeAddr(t), map[string]string{}, "cannot reach the local broker: check local.bootstrap.servers and destination.security.protocol (PLAINTEXT)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var text strings.Builder
			fmt.Fprintf(&text, "local.broker.id=0\nlocal.bootstrap.servers=%s\ndata.dir=%s\n", tc.bootstrap, filepath.Join(t.TempDir(), "data"))
			for k, v := range tc.props {
				fmt.Fprintf(&text, "%s=%s\n", k, v)
			}
			if len(tc.props) > 0 {
				// The test certificates name no host: the chain is
				// verified, the host name is not.
				text.WriteString("destination.ssl.endpoint.identification.algorithm=\n")
			}
			cfg, err := parseText(t, text.String())
			if err != nil {
				t.Fatal(err)
			}
			opts, err := cfg.Destination.KgoOpts()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			core, logs := observer.New(zap.InfoLevel)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); checkDestination(ctx, cl, cfg.Destination, zap.New(core)) }()
			if tc.want == "" {
				<-done
				if entries := logs.FilterMessage("local broker reachable").All(); len(entries) != 1 || logs.Len() != 1 {
					t.Fatalf("logged %v, want only that the local broker is reachable", logs.All())
				}
				return
			}
			testwait.For(t, 20*time.Second, "a warning or an error", func() bool { return logs.Len() > 0 })
			cancel()
			<-done
			entries := logs.All()
			// No answer is a warning (a broker not up yet is routine at
			// start), a refusal an error.
			want := zap.ErrorLevel
			if strings.Contains(tc.want, "cannot reach") {
				want = zap.WarnLevel
			}
			if len(entries) != 1 || entries[0].Level != want || !strings.Contains(entries[0].Message, tc.want) {
				t.Fatalf("logged %v, want one %s line containing %q", entries, want, tc.want)
			}
			line := entries[0].Message + fmt.Sprint(entries[0].ContextMap())
			if strings.Contains(line, "wrong-secret") || strings.Contains(line, "right-secret") {
				t.Errorf("the log line shows the password: %s", line)
			}
			t.Logf("%s %v", entries[0].Message, entries[0].ContextMap()["error"])
		})
	}
}

// TestDestinationProblemMessages: the refusals a real broker answers with,
// which kfake does not produce, get their own words.
func TestDestinationProblemMessages(t *testing.T) {
	sasl := security.DefaultClientConfig(DestinationPrefix)
	sasl.SecurityProtocol, sasl.SASLMechanism = "SASL_SSL", "SCRAM-SHA-512"
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512: %w", kerr.SaslAuthenticationFailed),
			"destination: the local broker refused this sidecar's SASL authentication: check destination.sasl.mechanism and the credentials in destination.sasl.jaas.config"},
		{fmt.Errorf("wrapped: %w", kerr.UnsupportedSaslMechanism), "refused this sidecar's SASL authentication"},
		{fmt.Errorf("%w: token endpoint http://idp/token answered 401 Unauthorized", security.ErrAuthentication),
			"destination: cannot get an OAUTHBEARER token for the local broker: check destination.sasl.oauthbearer.token.endpoint.url"},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, "the TLS handshake with the local broker failed"},
	} {
		if got := destinationProblem(sasl, tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("destinationProblem(%v) = %q, want it to contain %q", tc.err, got, tc.want)
		}
	}
}

// The passwords of the stores writeStores writes.
const storePass, keyPass = "store-secret", "key-secret"

// clientStores are a client's key and trust stores in every format.
type clientStores struct {
	p12, trustP12, jks, trustJKS string
	pem                          []byte // the unencrypted PEM key store
	dir                          string
}

// writeStores writes cert as a PKCS12 key store (under storePass), a JKS
// key store (store under storePass, key entry under keyPass) and the CA as
// PKCS12 and JKS trust stores.
func writeStores(t *testing.T, dir string, ca *testCA, cert tls.Certificate) clientStores {
	t.Helper()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	s := clientStores{dir: dir}
	write := func(name string, data []byte) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	p12, err := pkcs12.Modern.Encode(cert.PrivateKey, leaf, []*x509.Certificate{ca.cert}, storePass)
	if err != nil {
		t.Fatal(err)
	}
	s.p12 = write("sidecar.p12", p12)
	trust, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.cert}, storePass)
	if err != nil {
		t.Fatal(err)
	}
	s.trustP12 = write("truststore.p12", trust)

	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystore.New()
	if err := ks.SetPrivateKeyEntry("sidecar", keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der,
		CertificateChain: []keystore.Certificate{{Type: "X509", Content: leaf.Raw}, {Type: "X509", Content: ca.cert.Raw}}}, []byte(keyPass)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(storePass)); err != nil {
		t.Fatal(err)
	}
	s.jks = write("sidecar.jks", b.Bytes())
	ts := keystore.New()
	if err := ts.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{CreationTime: time.Now(),
		Certificate: keystore.Certificate{Type: "X509", Content: ca.cert.Raw}}); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := ts.Store(&b, []byte(storePass)); err != nil {
		t.Fatal(err)
	}
	s.trustJKS = write("truststore.jks", b.Bytes())
	s.pem = append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})...)
	return s
}

// encrypted writes the PEM key store with its key encrypted under keyPass
// by OpenSSL (PKCS#8, PBES2 with AES-256-CBC, as operators make them) and
// returns its path; the test is skipped without openssl.
func (s clientStores) encrypted(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	plain := filepath.Join(s.dir, "sidecar-plain.pem")
	if err := os.WriteFile(plain, s.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", plain, "-passout", "pass:"+keyPass).Output()
	if err != nil {
		t.Fatalf("openssl pkcs8: %v", err)
	}
	_, certPart, _ := bytes.Cut(s.pem, []byte("-----BEGIN CERTIFICATE-----"))
	file := filepath.Join(s.dir, "sidecar-encrypted.pem")
	if err := os.WriteFile(file, append(key, append([]byte("-----BEGIN CERTIFICATE-----"), certPart...)...), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
