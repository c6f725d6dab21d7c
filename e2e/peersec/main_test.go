package peersec

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars of this package; pki the
// certificates.
var (
	env *testbed.Env
	pki *authority
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sidemirror-peersec-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if pki, err = newAuthority(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := testbed.DefaultEnvOptions()
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true"}
	opts.SidecarConfigFor = func(s *testbed.Sidecar) map[string]string {
		keystore, _, err := pki.issue(fmt.Sprint("sidecar-", s.BrokerID), true)
		if err != nil {
			panic(err)
		}
		return map[string]string{
			"peer.security.protocol":       "SSL",
			"peer.ssl.keystore.location":   keystore,
			"peer.ssl.truststore.location": pki.caFile,
		}
	}
	testbed.Main(m, opts, &env)
}

// authority is the operator's CA for the peers, as files.
type authority struct {
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	caFile string
}

func newAuthority(dir string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sidemirror peer CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	a := &authority{dir: dir, cert: cert, key: key, caFile: filepath.Join(dir, "ca.pem")}
	return a, os.WriteFile(a.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

// issue writes a PEM key store for CN=cn, signed by the CA, or self-signed
// when signed is false, and returns its path and the certificate.
func (a *authority) issue(cn string, signed bool) (string, tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:   pkix.Name{CommonName: cn, Organization: []string{"sidemirror e2e"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	parent, signer := a.cert, a.key
	if !signed {
		parent, signer = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	file := filepath.Join(a.dir, fmt.Sprintf("%s-%v.pem", cn, signed))
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	return file, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, os.WriteFile(file, data, 0o600)
}
