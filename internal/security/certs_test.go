package security

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// testCA is a certificate authority for tests, with helpers that issue
// certificates and write them in every store format.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	dir  string
	n    int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sidemirror test CA", Organization: []string{"sidemirror"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IsCA:         true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, dir: t.TempDir(), n: 1}
}

// issue returns a leaf certificate for subject, valid for 127.0.0.1 and
// localhost, for both server and client use.
func (ca *testCA) issue(t *testing.T, subject pkix.Name) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.n++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.n),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func (ca *testCA) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(t *testing.T, k crypto.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// pemKeystore writes the key and the chain (leaf, CA) into one PEM file.
func (ca *testCA) pemKeystore(t *testing.T, name string, c *x509.Certificate, k crypto.PrivateKey) string {
	t.Helper()
	return ca.write(t, name, bytes.Join([][]byte{keyPEM(t, k), certPEM(c), certPEM(ca.cert)}, nil))
}

func (ca *testCA) pemTruststore(t *testing.T) string {
	return ca.write(t, "ca.pem", certPEM(ca.cert))
}

func (ca *testCA) pkcs12Keystore(t *testing.T, name string, c *x509.Certificate, k crypto.PrivateKey, password string) string {
	t.Helper()
	data, err := pkcs12.Modern.Encode(k, c, []*x509.Certificate{ca.cert}, password)
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(t, name, data)
}

func (ca *testCA) pkcs12Truststore(t *testing.T, password string) string {
	t.Helper()
	data, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.cert}, password)
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(t, "truststore.p12", data)
}

func (ca *testCA) jksKeystore(t *testing.T, name string, c *x509.Certificate, k crypto.PrivateKey, storePass, keyPass string) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystore.New()
	entry := keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der, CertificateChain: []keystore.Certificate{
		{Type: "X509", Content: c.Raw}, {Type: "X509", Content: ca.cert.Raw},
	}}
	if err := ks.SetPrivateKeyEntry("key", entry, []byte(keyPass)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(storePass)); err != nil {
		t.Fatal(err)
	}
	return ca.write(t, name, b.Bytes())
}

func (ca *testCA) jksTruststore(t *testing.T, password string) string {
	t.Helper()
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{
		CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: ca.cert.Raw},
	}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(password)); err != nil {
		t.Fatal(err)
	}
	return ca.write(t, "truststore.jks", b.Bytes())
}

// encryptedKeyPEM encrypts the key with OpenSSL's PKCS#8 PBES2 writer, the
// independent implementation operators use; the test is skipped without
// openssl.
func encryptedKeyPEM(t *testing.T, k crypto.PrivateKey, password, cipher string) []byte {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "plain.pem")
	if err := os.WriteFile(in, keyPEM(t, k), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", cipher, "-in", in, "-passout", "pass:"+password).Output()
	if err != nil {
		t.Fatalf("openssl pkcs8: %v", err)
	}
	return out
}
