// Package peertls is the sidecars' peer listener with mutual TLS: a
// raft.StreamLayer (hashicorp/raft's seam for transports, as Consul, Nomad
// and rqlite use it) that also carries the internal APIs (ApplyCommand,
// Read/WriteMirrorStates, DescribeLocalPartitions) between sidecars, so
// that both reach only authenticated members of the raft group.
//
// Every connection, in both directions, presents a certificate signed by
// the operator's CA, and each certificate is tied to a broker ID: Identify
// (the sidecar's peer.ssl.principal.mapping.rules) turns the verified
// certificate into the broker ID it names. An incoming connection is
// accepted only when that ID is a member of the group (Members); an
// outgoing one only when the peer is the member the address belongs to. A
// stranger's AppendEntries, RequestVote or InstallSnapshot (no certificate,
// a self-signed one, one of another CA, one naming a broker that is not a
// member) never reaches raft: the handshake or the identity check fails and
// the refusal is logged, rate-limited.
//
// After the handshake, the dialer writes one byte that says what the
// connection is for (as Consul multiplexes its RPC port): StreamRaft for
// raft's transport, StreamPeerAPI for the internal APIs, which Accept hands
// to raft and PeerAPI (a net.Listener for the admin protocol server) to the
// internal APIs. Their connections are *Conn, which carry the peer's
// broker ID.
//
// Bounds: at most MaxHandshakes handshakes run at once (more connections
// are closed at once), at most MaxConnections connections are open, and a
// connection that reads nothing for IdleTimeout is closed.
//
// Files: peertls.go.
package peertls

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// HandshakeTimeout bounds an incoming connection's TLS handshake and its
// stream byte.
const HandshakeTimeout = 10 * time.Second

// Defaults of Config's bounds.
const (
	DefaultMaxHandshakes  = 64
	DefaultMaxConnections = 256
	DefaultIdleTimeout    = 10 * time.Minute
)

// The stream bytes a dialer writes after the handshake.
const (
	StreamRaft    byte = 'R'
	StreamPeerAPI byte = 'A'
)

// ErrClosed is returned by Accept after Close.
var ErrClosed = errors.New("peertls: stream layer closed")

// Config is what the stream layer needs.
type Config struct {
	// Server is the listener side's TLS configuration; it must require and
	// verify a client certificate against the operator's CA (as
	// security.ServerTLS with ssl.client.auth=required does).
	Server *tls.Config
	// Client is the dialing side's: it presents this sidecar's
	// certificate and verifies the peer's chain against the CA (host names
	// are not checked: the identity is the broker ID).
	Client *tls.Config
	// Identify returns the broker ID a verified peer certificate names.
	Identify func(tls.ConnectionState) (int32, error)
	// Members returns the raft group: broker ID to raft address (raft.peers
	// and members added since).
	Members func() map[int32]string
	// Bounds; zero values take the Default* constants.
	MaxHandshakes, MaxConnections int
	IdleTimeout                   time.Duration
	// Logger gets refusals; nil logs nothing.
	Logger *zap.Logger
}

// StreamLayer implements raft.StreamLayer over TLS and serves the internal
// APIs' connections on PeerAPI.
type StreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	cfg       Config
	log       *zap.Logger

	raftConns chan net.Conn
	apiConns  chan net.Conn
	closed    chan struct{}
	ctx       context.Context // canceled by Close: ends handshakes
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup

	handshakes atomic.Int32
	open       atomic.Int32

	mu          sync.Mutex
	lastRefusal time.Time
	refused     int
}

// Listen listens on bind; advertise (nil: the listener's address) is what
// Addr reports to raft.
func Listen(bind string, advertise net.Addr, cfg Config) (*StreamLayer, error) {
	switch {
	case cfg.Server == nil || cfg.Client == nil:
		return nil, errors.New("peertls: no TLS configuration")
	case cfg.Identify == nil:
		return nil, errors.New("peertls: no identity function")
	case cfg.Members == nil:
		return nil, errors.New("peertls: no members")
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &StreamLayer{
		ln: ln, advertise: advertise, cfg: cfg, log: log.Named("raft-tls"),
		raftConns: make(chan net.Conn), apiConns: make(chan net.Conn), closed: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// member checks that id is a member of the group.
func (s *StreamLayer) member(id int32) error {
	if _, ok := s.cfg.Members()[id]; !ok {
		return fmt.Errorf("peertls: the certificate names broker %d, which is not a member of the raft group", id)
	}
	return nil
}

func (s *StreamLayer) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var te interface{ Temporary() bool }
			if !errors.As(err, &te) || !te.Temporary() {
				s.log.Error("raft listener failed", zap.Error(err))
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-s.closed:
				return
			}
			continue
		}
		backoff = 0
		switch {
		case int(s.open.Load()) >= s.cfg.MaxConnections:
			_ = c.Close()
			s.logRefusal(c.RemoteAddr(), fmt.Errorf("%d connections are open, the limit (raft.max.connections)", s.cfg.MaxConnections))
			continue
		case int(s.handshakes.Add(1)) > s.cfg.MaxHandshakes:
			s.handshakes.Add(-1)
			_ = c.Close()
			s.logRefusal(c.RemoteAddr(), fmt.Errorf("%d handshakes are in progress, the limit", s.cfg.MaxHandshakes))
			continue
		}
		s.open.Add(1)
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// handshake runs one incoming connection's handshake, checks the peer's
// identity, reads the stream byte and hands the connection on.
func (s *StreamLayer) handshake(c net.Conn) {
	defer s.wg.Done()
	tc := tls.Server(c, s.cfg.Server)
	ctx, cancel := context.WithTimeout(s.ctx, HandshakeTimeout)
	conn, kind, err := s.serverHandshake(ctx, tc)
	cancel()
	s.handshakes.Add(-1)
	if err != nil {
		_ = c.Close()
		s.open.Add(-1)
		s.logRefusal(c.RemoteAddr(), err)
		return
	}
	ch := s.raftConns
	if kind == StreamPeerAPI {
		ch = s.apiConns
	}
	select {
	case ch <- conn:
	case <-s.closed:
		_ = conn.Close()
	}
}

func (s *StreamLayer) serverHandshake(ctx context.Context, tc *tls.Conn) (*Conn, byte, error) {
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, 0, err
	}
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		return nil, 0, errors.New("peertls: the peer sent no certificate")
	}
	id, err := s.cfg.Identify(cs)
	if err != nil {
		return nil, 0, err
	}
	if err := s.member(id); err != nil {
		return nil, 0, err
	}
	dl, _ := ctx.Deadline()
	_ = tc.SetReadDeadline(dl)
	var b [1]byte
	if _, err := tc.Read(b[:]); err != nil {
		return nil, 0, fmt.Errorf("peertls: reading the stream byte of broker %d: %w", id, err)
	}
	_ = tc.SetReadDeadline(time.Time{})
	if b[0] != StreamRaft && b[0] != StreamPeerAPI {
		return nil, 0, fmt.Errorf("peertls: broker %d sent the unknown stream byte %#x", id, b[0])
	}
	return s.wrap(tc, id), b[0], nil
}

func (s *StreamLayer) wrap(tc *tls.Conn, id int32) *Conn {
	return &Conn{Conn: tc, id: id, idle: s.cfg.IdleTimeout, onClose: func() { s.open.Add(-1) }}
}

// logRefusal logs a refused connection, at most once per 10 seconds with
// the count since.
func (s *StreamLayer) logRefusal(from net.Addr, err error) {
	s.mu.Lock()
	s.refused++
	now := time.Now()
	if now.Sub(s.lastRefusal) < 10*time.Second {
		s.mu.Unlock()
		return
	}
	n := s.refused
	s.refused, s.lastRefusal = 0, now
	s.mu.Unlock()
	s.log.Warn("refused a raft connection: not a peer of the raft group (logged at most every 10 s)",
		zap.Stringer("remote-addr", from), zap.Error(err), zap.Int("refused", n))
}

// Accept returns the next verified raft connection.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.raftConns:
		return c, nil
	case <-s.closed:
		return nil, ErrClosed
	}
}

// Close stops listening and waits for the handshakes in progress.
func (s *StreamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cancel()
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

// Addr returns the advertised address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects raft to the member at address, verifying that the peer's
// certificate names that member's broker ID.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	id, ok := int32(-1), false
	for mid, addr := range s.cfg.Members() {
		if addr == string(address) {
			id, ok = mid, true
			break
		}
	}
	if !ok {
		return nil, fmt.Errorf("peertls: %s is not a raft address of the group", address)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, id, string(address), StreamRaft)
}

// DialPeerAPI connects to the internal APIs of member id, at its raft
// address, verifying that the peer's certificate names id.
func (s *StreamLayer) DialPeerAPI(ctx context.Context, id int32) (net.Conn, error) {
	addr, ok := s.cfg.Members()[id]
	if !ok {
		return nil, fmt.Errorf("peertls: broker %d is not a member of the raft group", id)
	}
	return s.dial(ctx, id, addr, StreamPeerAPI)
}

// Probe connects to addr, which need not be a member's yet, and verifies
// that the sidecar there holds a certificate naming broker id: the check
// before id is added to the group at addr.
func (s *StreamLayer) Probe(ctx context.Context, id int32, addr string) error {
	c, err := s.dial(ctx, id, addr, StreamPeerAPI)
	if err != nil {
		return err
	}
	return c.Close()
}

func (s *StreamLayer) dial(ctx context.Context, id int32, addr string, kind byte) (net.Conn, error) {
	cfg := s.cfg.Client.Clone()
	verifyChain := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if verifyChain != nil {
			if err := verifyChain(cs); err != nil {
				return err
			}
		}
		got, err := s.cfg.Identify(cs)
		if err != nil {
			return err
		}
		if got != id {
			return fmt.Errorf("peertls: %s presented the certificate of broker %d, but the raft group has broker %d there", addr, got, id)
		}
		return nil
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := c.(*tls.Conn)
	if dl, ok := ctx.Deadline(); ok {
		_ = tc.SetWriteDeadline(dl)
	}
	if _, err := tc.Write([]byte{kind}); err != nil {
		_ = tc.Close()
		return nil, err
	}
	_ = tc.SetWriteDeadline(time.Time{})
	return &Conn{Conn: tc, id: id}, nil
}

// PeerAPI returns a listener of the internal APIs' connections: each is a
// *Conn of an authenticated member. Closing it ends its Accept; the
// stream layer's Close ends every one.
func (s *StreamLayer) PeerAPI() net.Listener {
	return &peerAPIListener{s: s, done: make(chan struct{})}
}

type peerAPIListener struct {
	s    *StreamLayer
	done chan struct{}
	once sync.Once
}

func (l *peerAPIListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.s.apiConns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-l.s.closed:
		return nil, net.ErrClosed
	}
}

func (l *peerAPIListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *peerAPIListener) Addr() net.Addr { return l.s.ln.Addr() }

// Conn is a connection to or from an authenticated member of the raft
// group.
type Conn struct {
	*tls.Conn
	id        int32
	idle      time.Duration // > 0: every Read must deliver within it
	onClose   func()
	closeOnce sync.Once
}

// PeerBrokerID returns the broker ID the peer's certificate names.
func (c *Conn) PeerBrokerID() int32 { return c.id }

// Read reads, closing the connection after IdleTimeout without data.
func (c *Conn) Read(b []byte) (int, error) {
	if c.idle > 0 {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Read(b)
}

// Close closes the connection.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		if c.onClose != nil {
			c.onClose()
		}
	})
	return err
}

var _ raft.StreamLayer = (*StreamLayer)(nil)
