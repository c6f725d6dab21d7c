package peertls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "raft CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &ca{c, key, pool}
}

// issue returns a certificate for the given IP addresses.
func (c *ca) issue(t *testing.T, cn string, ips ...string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func listen(t *testing.T, cert tls.Certificate, pool *x509.CertPool, log *zap.Logger) *StreamLayer {
	t.Helper()
	s, err := Listen("127.0.0.1:0", nil, Config{Certificate: cert, CAs: pool, Logger: log,
		PeerHosts: func() []string { return []string{"127.0.0.1"} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestRaftOverTLS runs raft's network transport over two stream layers:
// AppendEntries between peers of the CA arrives; a stranger's (another CA,
// no certificate, a certificate for another host) never reaches raft and
// is logged.
func TestRaftOverTLS(t *testing.T) {
	auth := newCA(t)
	core, logs := observer.New(zapcore.InfoLevel)
	a := listen(t, auth.issue(t, "sidecar-1", "127.0.0.1"), auth.pool, zap.NewNop())
	b := listen(t, auth.issue(t, "sidecar-2", "127.0.0.1"), auth.pool, zap.New(core))
	transport := func(s raft.StreamLayer) *raft.NetworkTransport {
		tr := raft.NewNetworkTransport(s, 2, 5*time.Second, io.Discard)
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	ta, tb := transport(a), transport(b)
	received := make(chan *raft.AppendEntriesRequest, 4)
	go func() {
		for rpc := range tb.Consumer() {
			if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				received <- req
			}
			rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
		}
	}()
	var resp raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(a.Addr().String())}, Term: 7}
	if err := ta.AppendEntries("2", raft.ServerAddress(b.Addr().String()), req, &resp); err != nil || !resp.Success {
		t.Fatalf("AppendEntries between peers: %v %+v", err, resp)
	}
	if got := <-received; got.Term != 7 {
		t.Fatalf("received term %d", got.Term)
	}

	stranger := newCA(t)
	for name, cert := range map[string]*tls.Certificate{
		"a certificate of another CA":    ptr(stranger.issue(t, "sidecar-666", "127.0.0.1")),
		"no certificate":                 nil,
		"a certificate for another host": ptr(auth.issue(t, "sidecar-9", "10.9.9.9")),
	} {
		cfg := &tls.Config{RootCAs: auth.pool, ServerName: "127.0.0.1"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c, err := tls.Dial("tcp", b.Addr().String(), cfg)
		if err == nil {
			// TLS 1.3: a refused client certificate shows on the first read.
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte{0}) // raft's rpcAppendEntries type byte
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Errorf("%s: the connection was served", name)
		}
	}
	select {
	case r := <-received:
		t.Fatalf("a stranger's RPC reached raft: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	deadline := time.Now().Add(5 * time.Second)
	for logs.FilterMessageSnippet("refused a raft connection").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if logs.FilterMessageSnippet("refused a raft connection").Len() == 0 {
		t.Error("no refusal was logged")
	}

	// Dialing an address outside the group is refused before connecting.
	if _, err := a.Dial("10.9.9.9:9192", time.Second); err == nil {
		t.Error("dialed an address that is not in the group")
	}
}

func ptr[T any](v T) *T { return &v }
