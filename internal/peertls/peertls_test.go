package peertls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sidemirror/sidemirror/internal/testwait"
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

// identify is the test's mapping: the broker ID in a CN "sidecar-<id>".
func identify(cs tls.ConnectionState) (int32, error) {
	var id int32
	if _, err := fmt.Sscanf(cs.PeerCertificates[0].Subject.CommonName, "sidecar-%d", &id); err != nil {
		return -1, fmt.Errorf("CN %q names no broker", cs.PeerCertificates[0].Subject.CommonName)
	}
	return id, nil
}

func configs(cert tls.Certificate, pool *x509.CertPool) (server, client *tls.Config) {
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool})
			return err
		}}
	return server, client
}

// group holds the members' raft addresses, filled in as layers listen.
type group struct {
	mu      sync.Mutex
	members map[int32]string
}

func (g *group) get() map[int32]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.members)
}

func (g *group) set(id int32, addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members[id] = addr
}

func listen(t *testing.T, g *group, id int32, cert tls.Certificate, pool *x509.CertPool, log *zap.Logger, tweak ...func(*Config)) *StreamLayer {
	t.Helper()
	server, client := configs(cert, pool)
	cfg := Config{Server: server, Client: client, Identify: identify, Members: g.get, Logger: log}
	for _, f := range tweak {
		f(&cfg)
	}
	s, err := Listen("127.0.0.1:0", nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	g.set(id, s.Addr().String())
	return s
}

// refused dials addr as a raft peer would, with cert (nil: none), and
// reports whether the connection was refused.
func refused(t *testing.T, addr string, pool *x509.CertPool, cert *tls.Certificate) bool {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return true
	}
	defer c.Close()
	// TLS 1.3: a refused client certificate shows on the first read.
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte{StreamRaft, 0}) // the stream byte, raft's rpcAppendEntries type byte
	_, err = c.Read(make([]byte, 1))
	return err != nil
}

// TestRaftOverTLS runs raft's network transport over two stream layers:
// AppendEntries between members arrives; a stranger's (a certificate of
// another CA, a self-signed one, none, one of the CA naming a broker that
// is not a member) never reaches raft and is logged; a member whose
// address holds another broker's certificate is not dialed.
func TestRaftOverTLS(t *testing.T) {
	auth := newCA(t)
	core, logs := observer.New(zapcore.InfoLevel)
	g := &group{members: map[int32]string{}}
	a := listen(t, g, 1, auth.issue(t, "sidecar-1", "127.0.0.1"), auth.pool, zap.NewNop())
	b := listen(t, g, 2, auth.issue(t, "sidecar-2", "127.0.0.1"), auth.pool, zap.New(core))
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
		"a certificate of another CA":                ptr(stranger.issue(t, "sidecar-2", "127.0.0.1")),
		"a self-signed certificate":                  ptr(selfSigned(t, "sidecar-1")),
		"no certificate":                             nil,
		"a certificate of a broker not in the group": ptr(auth.issue(t, "sidecar-666", "127.0.0.1")),
		"a certificate naming no broker":             ptr(auth.issue(t, "kafka-cluster-mirrors", "127.0.0.1")),
	} {
		if !refused(t, b.Addr().String(), auth.pool, cert) {
			t.Errorf("%s: the connection was served", name)
		}
	}
	select {
	case r := <-received:
		t.Fatalf("a stranger's RPC reached raft: %+v", r)
	default:
	}
	testwait.For(t, 5*time.Second, "the refusal log", func() bool {
		return logs.FilterMessageSnippet("refused a raft connection").Len() > 0
	})

	// Dialing an address outside the group is refused before connecting.
	if _, err := a.Dial("10.9.9.9:9192", time.Second); err == nil {
		t.Error("dialed an address that is not in the group")
	}
	// A member's address that answers with another member's certificate
	// (broker 2's key at the address the group has for broker 3) is not
	// dialed.
	impostor := listen(t, g, 3, auth.issue(t, "sidecar-2", "127.0.0.1"), auth.pool, zap.NewNop())
	if _, err := a.Dial(raft.ServerAddress(impostor.Addr().String()), 5*time.Second); err == nil || !strings.Contains(err.Error(), "certificate of broker 2") {
		t.Errorf("dialed broker 3's address holding broker 2's certificate: %v", err)
	}
}

// TestPeerAPI: DialPeerAPI's connections arrive on PeerAPI, as *Conn
// naming the dialer's broker ID, and carry bytes both ways; raft's Accept
// does not see them.
func TestPeerAPI(t *testing.T) {
	auth := newCA(t)
	g := &group{members: map[int32]string{}}
	a := listen(t, g, 1, auth.issue(t, "sidecar-1"), auth.pool, zap.NewNop())
	b := listen(t, g, 2, auth.issue(t, "sidecar-2"), auth.pool, zap.NewNop())
	ln := b.PeerAPI()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.DialPeerAPI(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.(*Conn).PeerBrokerID(); got != 2 {
		t.Errorf("the dialer sees broker %d", got)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	var sc net.Conn
	select {
	case sc = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no peer API connection accepted")
	}
	defer sc.Close()
	if got := sc.(*Conn).PeerBrokerID(); got != 1 {
		t.Errorf("the listener sees broker %d", got)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "ping" {
		t.Errorf("read %q, %v", buf, err)
	}
	if _, err := a.DialPeerAPI(ctx, 9); err == nil {
		t.Error("dialed the peer API of a broker that is not a member")
	}
	// Closing the listener ends its Accept.
	_ = ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	// Probe checks the identity at an address that is not a member's yet.
	if err := a.Probe(ctx, 2, b.Addr().String()); err != nil {
		t.Errorf("probing broker 2: %v", err)
	}
	if err := a.Probe(ctx, 5, b.Addr().String()); err == nil {
		t.Error("probing broker 5 at broker 2's address succeeded")
	}
}

// TestConnectionLimit: beyond MaxConnections, connections are closed when
// accepted, and the ones within the limit keep working.
func TestConnectionLimit(t *testing.T) {
	auth := newCA(t)
	core, logs := observer.New(zapcore.InfoLevel)
	g := &group{members: map[int32]string{}}
	a := listen(t, g, 1, auth.issue(t, "sidecar-1"), auth.pool, zap.NewNop())
	b := listen(t, g, 2, auth.issue(t, "sidecar-2"), auth.pool, zap.New(core), func(c *Config) { c.MaxConnections = 4 })
	var held []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	testwait.For(t, 5*time.Second, "four open connections", func() bool { return b.open.Load() == 4 })
	extra, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the fifth connection was not closed at once: %v", err)
	}
	testwait.For(t, 5*time.Second, "the refusal log", func() bool {
		return logs.FilterMessageSnippet("refused a raft connection").Len() > 0
	})
	// Closing the held ones frees the slots for a member.
	for _, c := range held {
		c.Close()
	}
	held = nil
	testwait.For(t, 15*time.Second, "the slots to free up", func() bool { return b.open.Load() == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.DialPeerAPI(ctx, 2)
	if err != nil {
		t.Fatalf("a member cannot connect after the strangers left: %v", err)
	}
	c.Close()
}

func selfSigned(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func ptr[T any](v T) *T { return &v }
