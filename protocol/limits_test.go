package protocol

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// recorder answers every request with an empty response and records the
// ConnInfo of the last one.
type recorder struct {
	calls atomic.Int32
	last  atomic.Pointer[ConnInfo]
}

func (r *recorder) Handle(_ context.Context, c *ConnInfo, req Request) Response {
	r.calls.Add(1)
	r.last.Store(c)
	return req.ResponseKind()
}

// TestMaxConnections: beyond the limit a connection is closed when
// accepted (and logged); the open ones keep working, and a slot freed is
// usable again.
func TestMaxConnections(t *testing.T) {
	s := startServer(t, &recorder{}, MaxConnections(3))
	var clients []*Client
	for range 3 {
		c := dial(t, s.addr)
		do(t, c, &ListClusterMirrorsRequest{})
		clients = append(clients, c)
	}
	extra, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the fourth connection was not closed at once: %v", err)
	}
	if s.logs.FilterMessageSnippet("admin.max.connections").Len() == 0 {
		t.Error("the refusal was not logged")
	}
	do(t, clients[0], &ListClusterMirrorsRequest{})
	_ = clients[0].Close()
	testwait.For(t, 5*time.Second, "a freed slot", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := Dial(ctx, s.addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = c.Do(ctx, &ListClusterMirrorsRequest{})
		return err == nil
	})
}

// peerListener hands out connections that claim a peer identity, as
// peertls.StreamLayer.PeerAPI does.
type peerListener struct {
	net.Listener
	id int32
}

type peerTestConn struct {
	net.Conn
	id int32
}

func (c peerTestConn) PeerBrokerID() int32 { return c.id }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerTestConn{c, l.id}, nil
}

// TestPeerAPIsOnly: with PeerAPIsOnly, the internal APIs are refused with
// CLUSTER_AUTHORIZATION_FAILED to a client without a peer identity (a raw
// ApplyCommand never reaches the handler) and served to a peer, whose
// broker ID the handler sees; admin APIs are served to both. Without the
// option nothing changes.
func TestPeerAPIsOnly(t *testing.T) {
	h := &recorder{}
	s := startServer(t, h, PeerAPIsOnly(true))
	c := dial(t, s.addr)
	for _, req := range []Request{
		&ApplyCommandRequest{Command: []byte{1, 1, '{', '}'}},
		&ReadMirrorStatesRequest{MirrorName: "m"},
		&WriteMirrorStatesRequest{MirrorName: "m"},
		&DescribeLocalPartitionsRequest{},
	} {
		resp := do(t, c, req)
		var code int16
		switch r := resp.(type) {
		case *ApplyCommandResponse:
			code = r.ErrorCode
		case *ReadMirrorStatesResponse:
			code = r.ErrorCode
		case *WriteMirrorStatesResponse:
			code = r.ErrorCode
		case *DescribeLocalPartitionsResponse:
			code = r.ErrorCode
		}
		if code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("%s without a peer identity: error code %d", KeyName(req.Key()), code)
		}
	}
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("the handler saw %d internal requests of a stranger", n)
	}
	if s.logs.FilterMessageSnippet("not an authenticated sidecar peer").Len() == 0 {
		t.Error("the refusal was not logged")
	}
	do(t, c, &ListClusterMirrorsRequest{})
	if h.calls.Load() != 1 || h.last.Load().Peer != nil {
		t.Error("an admin API was not served to the client, or it got a peer identity")
	}

	// The same server on a peer listener serves them, with the identity.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(peerListener{l, 2}) }()
	pc := dial(t, l.Addr().String())
	if r := do(t, pc, &ApplyCommandRequest{Command: []byte{1, 1}}).(*ApplyCommandResponse); r.ErrorCode != 0 {
		t.Errorf("a peer's ApplyCommand: error code %d", r.ErrorCode)
	}
	if info := h.last.Load(); info.Peer == nil || info.Peer.BrokerID != 2 || info.TLS != nil {
		t.Errorf("the handler saw peer %+v, TLS %v", info.Peer, info.TLS)
	}

	// Without the option (peer.security.protocol=PLAINTEXT) the internal
	// APIs stay open.
	open := startServer(t, h, PeerAPIsOnly(false))
	if r := do(t, dial(t, open.addr), &ApplyCommandRequest{Command: []byte{1, 1}}).(*ApplyCommandResponse); r.ErrorCode != 0 {
		t.Errorf("without PeerAPIsOnly: error code %d", r.ErrorCode)
	}
}

// TestTLSListenerConnInfo: on a TLSListener, the handler sees the TLS state
// with the client's verified certificate; a client that fails the
// handshake is closed without reaching the handler.
func TestTLSListenerConnInfo(t *testing.T) {
	cert := selfSignedCert(t)
	pool := x509Pool(t, cert)
	h := &recorder{}
	s := NewServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = s.Serve(TLSListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}))
	}()
	t.Cleanup(func() { _ = s.Close() })
	c := dial(t, l.Addr().String(), DialTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1"}))
	do(t, c, &ListClusterMirrorsRequest{})
	info := h.last.Load()
	if info == nil || info.TLS == nil || len(info.TLS.PeerCertificates) != 1 || info.TLS.PeerCertificates[0].Subject.CommonName != "sidecar-1" {
		t.Fatalf("ConnInfo.TLS = %+v", info)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if bad, err := Dial(ctx, l.Addr().String(), DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})); err == nil {
		_, err = bad.Do(ctx, &ListClusterMirrorsRequest{})
		bad.Close()
		if err == nil {
			t.Error("a client without a certificate was served")
		}
	}
	if h.calls.Load() != 1 {
		t.Errorf("the handler saw %d requests, want 1", h.calls.Load())
	}
}

// TestTooManyElements: a request is decoded up to MaxRequestElements array
// elements and refused beyond, so that the 16 MiB StopMirrorTopics with 16.7
// million empty patterns, which kept 325 MiB, allocates little more than
// its frame before its connection is closed.
func TestTooManyElements(t *testing.T) {
	encode := func(n int) []byte {
		req := &StopMirrorTopicsRequest{MirrorName: "m", Patterns: make([]string, n)}
		return req.AppendTo(nil)
	}
	var req StopMirrorTopicsRequest
	if err := req.ReadFrom(encode(MaxRequestElements)); err != nil {
		t.Fatalf("%d patterns: %v", MaxRequestElements, err)
	}
	err := req.ReadFrom(encode(MaxRequestElements + 1))
	if !errors.Is(err, ErrTooManyElements) {
		t.Fatalf("%d patterns: %v", MaxRequestElements+1, err)
	}
	// Every request that takes topic patterns is bounded the same way.
	for _, req := range []Request{
		&PauseMirrorTopicsRequest{MirrorName: "m", TopicPatterns: make([]string, MaxRequestElements+1)},
		&ResumeMirrorTopicsRequest{MirrorName: "m", TopicPatterns: make([]string, MaxRequestElements+1)},
		&RecoverMirrorTopicsRequest{MirrorName: "m", TopicPatterns: make([]string, MaxRequestElements+1)},
		&StartMirrorTopicsRequest{MirrorName: "m", TopicPatterns: make([]string, MaxRequestElements+1)},
	} {
		body := req.AppendTo(nil)
		if err := req.ReadFrom(body); !errors.Is(err, ErrTooManyElements) {
			t.Errorf("%T with %d patterns: %v, want %v", req, MaxRequestElements+1, err, ErrTooManyElements)
		}
	}
	// Responses are not bounded by it.
	resp := &DescribeLocalPartitionsResponse{Mirrors: make([]DescribedMirror, MaxRequestElements+1)}
	if err := new(DescribeLocalPartitionsResponse).ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Errorf("a large response: %v", err)
	}

	h := &recorder{}
	s := startServer(t, h)
	frame := rawFrame(KeyStopMirrorTopics, 0, 1, encode(DefaultMaxFrameBytes-64))
	if len(frame)-4 > DefaultMaxFrameBytes {
		t.Fatalf("frame of %d bytes", len(frame))
	}
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the connection was not closed: %v", err)
	}
	runtime.ReadMemStats(&after)
	if h.calls.Load() != 0 {
		t.Error("the request reached the handler")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 48<<20 {
		t.Errorf("decoding the request allocated %d MiB", alloc>>20)
	} else {
		t.Logf("the request allocated %d MiB", alloc>>20)
	}
	if s.logs.FilterMessageSnippet("does not decode").Len() == 0 {
		t.Error("the refusal was not logged")
	}
	testwait.For(t, 5*time.Second, "the queued bytes to be released", func() bool { return s.queued.held() == 0 })
}

// TestByteBudget: a request that does not fit MaxQueuedBytes waits until
// one in progress is answered.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	if !b.acquire(context.Background(), 80) {
		t.Fatal("first acquire")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if b.acquire(ctx, 30) {
		t.Fatal("acquired past the budget")
	}
	got := make(chan bool)
	go func() { got <- b.acquire(context.Background(), 30) }()
	b.release(80)
	if !<-got {
		t.Fatal("acquire after release failed")
	}
	if b.held() != 30 {
		t.Errorf("held %d", b.held())
	}
	// More than the budget is capped at it, so it does not wait forever.
	b.release(30)
	if !b.acquire(context.Background(), 1000) || b.held() != 100 {
		t.Errorf("an oversized acquire: held %d", b.held())
	}
}

// selfSignedCert is a certificate for 127.0.0.1, CN sidecar-1, usable by
// servers and clients.
func selfSignedCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sidecar-1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func x509Pool(t *testing.T, cert tls.Certificate) *x509.CertPool {
	t.Helper()
	c, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return pool
}
