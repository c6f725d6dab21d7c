package sidecar

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	caFile, serverFile, clientFile string
	caPool                         *x509.CertPool
	client                         tls.Certificate
}

func newTestPKI(t *testing.T, clientSubject pkix.Name) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	}
	write := func(name string, b ...[]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(func() []string {
			var s []string
			for _, x := range b {
				s = append(s, string(x))
			}
			return s
		}(), "")), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pki := testPKI{caPool: x509.NewCertPool()}
	pki.caPool.AddCert(ca)
	pki.caFile = write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	sc, sk := issue(2, pkix.Name{CommonName: "sidecar"}, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	pki.serverFile = write("server.pem", sc, sk)
	cc, ck := issue(3, clientSubject, x509.ExtKeyUsageClientAuth, nil)
	pki.clientFile = write("client.pem", cc, ck)
	if pki.client, err = tls.X509KeyPair(cc, ck); err != nil {
		t.Fatal(err)
	}
	return pki
}

// principalHandler records the principal of every request.
type principalHandler struct {
	mu         sync.Mutex
	principals []string
}

func (h *principalHandler) Handle(_ context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.principals = append(h.principals, c.Principal)
	return req.ResponseKind()
}

// TestAdminSSLPrincipal serves an SSL admin endpoint that requires client
// certificates, built from the admin.ssl.* keys as the sidecar builds it:
// the principal is the certificate's DN mapped by
// admin.ssl.principal.mapping.rules, a client without a certificate is
// refused, and so is a PLAINTEXT client.
func TestAdminSSLPrincipal(t *testing.T) {
	pki := newTestPKI(t, pkix.Name{CommonName: "Ops-Laptop", Organization: []string{"Example"}})
	cfg := DefaultConfig()
	cfg.Admin.Protocol = security.ProtocolSSL
	cfg.Admin.TLS.Stores.KeystoreLocation = pki.serverFile
	cfg.Admin.TLS.Stores.TruststoreLocation = pki.caFile
	cfg.Admin.TLS.ClientAuth = security.ClientAuthRequired
	cfg.Admin.TLS.PrincipalMappingRules = `RULE:^CN=([^,]+),O=Example$/$1/L,DEFAULT`
	if err := cfg.Admin.validate(cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.Admin.Authorization().Enabled {
		t.Fatal("authorization is off with admin.security.protocol=SSL")
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts, ln, err := adminServerOpts(cfg, raw)
	if err != nil {
		t.Fatal(err)
	}
	h := &principalHandler{}
	srv := protocol.NewServer(h, opts...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, protocol.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	addr := raw.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := func(opts ...protocol.ClientOpt) error {
		cl, err := protocol.Dial(ctx, addr, opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = cl.Do(ctx, &protocol.ListClusterMirrorsRequest{})
		return err
	}
	if err := list(protocol.DialTLSConfig(&tls.Config{RootCAs: pki.caPool, Certificates: []tls.Certificate{pki.client}})); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	if err := list(protocol.DialTLSConfig(&tls.Config{RootCAs: pki.caPool})); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if err := list(); err == nil {
		t.Fatal("a PLAINTEXT client was served")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.Join(h.principals, ",") != "User:ops-laptop" {
		t.Fatalf("principals %v, want only User:ops-laptop", h.principals)
	}
}

// TestAdminSecurityValidation checks the admin security keys' errors.
func TestAdminSecurityValidation(t *testing.T) {
	base := []Property{{Key: KeyLocalBrokerID, Value: "1"}, {Key: KeyLocalBootstrapServers, Value: "127.0.0.1:9092"}, {Key: KeyDataDir, Value: "/tmp/x"}}
	for _, tc := range []struct {
		props []Property
		want  string
	}{
		{[]Property{{Key: KeyAdminSecurityProtocol, Value: "TLS"}}, `admin.security.protocol: "TLS" is not supported`},
		{[]Property{{Key: KeyAdminSecurityProtocol, Value: "SASL_PLAINTEXT"}}, "admin.sasl.relay.security.protocol: is not set and destination.security.protocol is PLAINTEXT"},
		{[]Property{{Key: KeyAdminSecurityProtocol, Value: "SASL_PLAINTEXT"}, {Key: KeyAdminSASLRelayProto, Value: "SASL_PLAINTEXT"},
			{Key: KeyAdminSASLMechanisms, Value: "GSSAPI"}}, `admin.sasl.enabled.mechanisms: "GSSAPI" is not supported`},
		{[]Property{{Key: KeyAdminSecurityProtocol, Value: "SSL"}}, "admin.ssl.keystore.location: is missing"},
		{[]Property{{Key: KeyAdminSuperUsers, Value: "admin"}}, `admin.super.users: "admin" is not a principal`},
		{[]Property{{Key: KeyAdminSecurityProtocol, Value: "SASL_SSL"}, {Key: "admin.ssl.keystore.location", Value: "/etc/sidemirror/admin.p12"},
			{Key: KeyRaftListener, Value: "127.0.0.1:9192"}, {Key: KeyRaftPeers, Value: "1@127.0.0.1:9192,2@127.0.0.1:9292"}},
			"admin.security.protocol: SASL_SSL with peer.security.protocol=PLAINTEXT cannot work in a group of 2 sidecars"},
	} {
		_, err := ParseConfig(append(append([]Property{}, base...), tc.props...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.props, err, tc.want)
		}
	}
	c, err := ParseConfig(append(append([]Property{}, base...), Property{Key: KeyAdminSecurityProtocol, Value: "SASL_PLAINTEXT"},
		Property{Key: KeyAdminSASLRelayProto, Value: "SASL_PLAINTEXT"}, Property{Key: KeyAdminSASLRelayServers, Value: "127.0.0.1:9094"},
		Property{Key: KeyAdminSuperUsers, Value: "User:admin; User:CN=ops,O=example"}))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Admin.Authorization(); !a.Enabled || strings.Join(a.SuperUsers, ";") != "User:admin;User:CN=ops,O=example" {
		t.Fatalf("authorization %+v", a)
	}
	if d := DefaultConfig(); d.Admin.Authorization().Enabled {
		t.Fatal("the default PLAINTEXT admin endpoint has authorization on")
	}
}

// TestAdminSASLSSL serves a SASL_SSL admin endpoint relaying to a kfake
// broker: a client needs both TLS and its SASL login, and its principal is
// the SASL user's, not its certificate's.
func TestAdminSASLSSL(t *testing.T) {
	pki := newTestPKI(t, pkix.Name{CommonName: "laptop"})
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "ops", "ops-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	cfg := DefaultConfig()
	cfg.LocalBootstrapServers = broker.ListenAddrs()
	cfg.Admin.Protocol = security.ProtocolSASLSSL
	cfg.Admin.RelayProtocol = security.ProtocolSASLPlaintext
	cfg.Admin.TLS.Stores.KeystoreLocation = pki.serverFile
	if err := cfg.Admin.validate(cfg); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts, ln, err := adminServerOpts(cfg, raw)
	if err != nil {
		t.Fatal(err)
	}
	h := &principalHandler{}
	srv := protocol.NewServer(h, opts...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, protocol.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := func(opts ...protocol.ClientOpt) error {
		cl, err := protocol.Dial(ctx, raw.Addr().String(), opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = cl.Do(ctx, &protocol.ListClusterMirrorsRequest{})
		return err
	}
	tlsOpt := protocol.DialTLSConfig(&tls.Config{RootCAs: pki.caPool, Certificates: []tls.Certificate{pki.client}})
	login := protocol.SASLMechanism(scram.Auth{User: "ops", Pass: "ops-pw"}.AsSha256Mechanism())
	if err := list(tlsOpt, login); err != nil {
		t.Fatalf("TLS and SCRAM: %v", err)
	}
	if err := list(tlsOpt); err == nil {
		t.Fatal("TLS without SASL was served")
	}
	if err := list(login); err == nil {
		t.Fatal("SASL without TLS was served")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.Join(h.principals, ",") != "User:ops" {
		t.Fatalf("principals %v, want only User:ops", h.principals)
	}
}

// TestPeerSecurityWarning checks when a secured admin endpoint without peer
// security is warned about, and that a sidecar started that way logs the
// warning once, naming peer.security.protocol=SSL, and runs.
func TestPeerSecurityWarning(t *testing.T) {
	sasl := func(peers []RaftPeer, peerProtocol string) Config {
		c := DefaultConfig()
		c.LocalBrokerID = 1
		c.Admin.Protocol, c.Admin.RelayProtocol = security.ProtocolSASLPlaintext, security.ProtocolSASLPlaintext
		c.RaftPeers, c.Peer.Protocol = peers, peerProtocol
		return c
	}
	three := []RaftPeer{{1, "10.0.0.1:9192"}, {2, "10.0.0.2:9192"}, {3, "10.0.0.3:9192"}}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings; nil: no warning
	}{
		{"the default", DefaultConfig(), nil},
		{"SASL with peer TLS", sasl(three, "SSL"), nil},
		{"SASL, PLAINTEXT peers, three sidecars", sasl(three, "PLAINTEXT"),
			[]string{"admin.security.protocol is SASL_PLAINTEXT", "group of 3 sidecars", "internal APIs", "set peer.security.protocol=SSL on every sidecar"}},
		{"SASL, PLAINTEXT peers, alone", sasl(nil, "PLAINTEXT"),
			[]string{"admin.security.protocol is SASL_PLAINTEXT", "internal APIs", "bypassing the ACLs", "set peer.security.protocol=SSL"}},
	} {
		got := peerSecurityWarning(tc.cfg)
		if tc.want == nil && got != "" {
			t.Errorf("%s: warning %q, want none", tc.name, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: warning %q, want it to say %q", tc.name, got, w)
			}
		}
	}

	// A sidecar with a SASL_PLAINTEXT admin endpoint and PLAINTEXT peers
	// starts and logs the warning once.
	cfg := testConfig(t, t.TempDir())
	cfg.AdminListener, cfg.RaftListener = "127.0.0.1:0", freeAddr(t)
	cfg.Admin.Protocol, cfg.Admin.RelayProtocol = security.ProtocolSASLPlaintext, security.ProtocolSASLPlaintext
	core, logs := observer.New(zap.WarnLevel)
	sc, err := New(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-sc.Ready():
	case err := <-done:
		t.Fatalf("Run returned: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready after 10 s")
	}
	warned := logs.FilterMessageSnippet("set peer.security.protocol=SSL").Len()
	if warned != 1 {
		t.Fatalf("%d start warnings naming peer.security.protocol=SSL, want 1; warnings: %v", warned, logs.All())
	}
}
