package testbed

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"testing"

	"github.com/sidemirror/sidemirror/internal/security"
)

// TestPKIStores checks that every store PKI writes is read by sidemirror's
// client security and authenticates the client to a server that requires
// a certificate signed by the CA.
func TestPKIStores(t *testing.T) {
	for _, tool := range []string{"openssl", "keytool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err := p.IssuePEM("server")
	if err != nil {
		t.Fatal(err)
	}
	const pw = "store-secret"
	p12, err := p.IssuePKCS12("client-p12", pw)
	if err != nil {
		t.Fatal(err)
	}
	jks, err := p.IssueJKS("client-jks", pw)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := p.IssueEncryptedPEM("client-enc", pw)
	if err != nil {
		t.Fatal(err)
	}
	p12Trust, err := p.TrustStore("PKCS12", pw)
	if err != nil {
		t.Fatal(err)
	}
	jksTrust, err := p.TrustStore("JKS", pw)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		props map[string]string
		cn    string
	}{
		"PKCS12": {map[string]string{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": p12, "ssl.keystore.password": pw,
			"ssl.truststore.type": "PKCS12", "ssl.truststore.location": p12Trust, "ssl.truststore.password": pw}, "client-p12"},
		"JKS": {map[string]string{"ssl.keystore.type": "JKS", "ssl.keystore.location": jks, "ssl.keystore.password": pw, "ssl.key.password": pw,
			"ssl.truststore.type": "JKS", "ssl.truststore.location": jksTrust, "ssl.truststore.password": pw}, "client-jks"},
		"encrypted PKCS#8": {map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": enc, "ssl.key.password": pw,
			"ssl.truststore.type": "PEM", "ssl.truststore.location": p.CAFile}, "client-enc"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			c.props["security.protocol"] = "SSL"
			cfg, err := security.ParseClientConfig(c.props, "")
			if err == nil {
				err = cfg.Validate()
			}
			if err != nil {
				t.Fatal(err)
			}
			tc, err := cfg.TLSConfig()
			if err != nil {
				t.Fatal(err)
			}
			if got := handshake(t, p, server, tc); got != c.cn {
				t.Errorf("the server saw client CN %q, want %q", got, c.cn)
			}
		})
	}
}

// handshake serves one TLS connection with server's key store, requiring
// a client certificate signed by p, dials it with client and returns the
// client certificate's common name.
func handshake(t *testing.T, p *PKI, server string, client *tls.Config) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(server, server)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cn := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			cn <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			cn <- err.Error()
			return
		}
		cn <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}()
	client = client.Clone()
	client.ServerName = "localhost"
	c, err := tls.Dial("tcp", l.Addr().String(), client)
	if err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	defer c.Close()
	_ = c.Handshake()
	return <-cn
}

// TestPKISelfSigned checks IssueSelfSigned and TLSCertificate: the
// self-signed certificate names CN=cn but does not chain to the CA, the
// CA's own does.
func TestPKISelfSigned(t *testing.T) {
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	for _, tc := range []struct {
		issue    func(string) (string, error)
		verified bool
	}{{p.IssuePEM, true}, {p.IssueSelfSigned, false}} {
		file, err := tc.issue("sidecar-7")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := TLSCertificate(file)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if leaf.Subject.CommonName != "sidecar-7" || (err == nil) != tc.verified {
			t.Errorf("%s: CN %q, verified by the CA: %v, want %v", file, leaf.Subject.CommonName, err, tc.verified)
		}
	}
}
