// Package peertls is the raft transport's stream layer with mutual TLS: a
// raft.StreamLayer (hashicorp/raft's seam for transports, as Consul, Nomad
// and rqlite use it) whose connections, in both directions, present a
// certificate signed by the operator's CA, and whose peers are tied to the
// raft group: an incoming connection is accepted only when its certificate
// names the host of one of the group's raft addresses, and an outgoing one
// only when the peer's certificate names the host dialed. A stranger's
// AppendEntries, RequestVote or InstallSnapshot (no certificate, a
// self-signed one, one of another CA, one for another host) never reaches
// raft: the handshake fails, and the refusal is logged, rate-limited.
//
// Handshakes run in their own goroutines with a deadline, so a slow or
// silent stranger does not hold up the peers' connections.
//
// Files: peertls.go.
package peertls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// HandshakeTimeout bounds an incoming connection's TLS handshake.
const HandshakeTimeout = 10 * time.Second

// ErrClosed is returned by Accept after Close.
var ErrClosed = errors.New("peertls: stream layer closed")

// Config is what the stream layer needs.
type Config struct {
	// Certificate is this sidecar's: it must name the host of its raft
	// address (as a DNS name or IP address SAN), and be usable for server
	// and client authentication.
	Certificate tls.Certificate
	// CAs verifies the peers' certificates.
	CAs *x509.CertPool
	// PeerHosts returns the hosts of the raft group's addresses (raft.peers
	// and members added since); a peer's certificate must name one.
	PeerHosts func() []string
	// Logger gets refusals; nil logs nothing.
	Logger *zap.Logger
}

// StreamLayer implements raft.StreamLayer over TLS.
type StreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	server    *tls.Config
	client    *tls.Config
	peerHosts func() []string
	log       *zap.Logger

	conns     chan net.Conn
	closed    chan struct{}
	ctx       context.Context // canceled by Close: ends handshakes
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu          sync.Mutex
	lastRefusal time.Time
	refused     int
}

// Listen listens on bind; advertise (nil: the listener's address) is what
// Addr reports to raft.
func Listen(bind string, advertise net.Addr, cfg Config) (*StreamLayer, error) {
	switch {
	case cfg.CAs == nil:
		return nil, errors.New("peertls: no CA to verify peers with")
	case len(cfg.Certificate.Certificate) == 0:
		return nil, errors.New("peertls: no certificate")
	case cfg.PeerHosts == nil:
		return nil, errors.New("peertls: no peer hosts")
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
		ln: ln, advertise: advertise, peerHosts: cfg.PeerHosts, log: log.Named("raft-tls"),
		conns: make(chan net.Conn), closed: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cfg.Certificate},
		ClientCAs:    cfg.CAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return s.checkPeer(cs.PeerCertificates[0])
		},
	}
	s.client = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cfg.Certificate},
		RootCAs:      cfg.CAs,
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// checkPeer accepts a verified certificate that names the host of one of
// the group's raft addresses.
func (s *StreamLayer) checkPeer(cert *x509.Certificate) error {
	for _, h := range s.peerHosts() {
		if cert.VerifyHostname(h) == nil {
			return nil
		}
	}
	return fmt.Errorf("peertls: the certificate of %q names none of the raft group's hosts %v", cert.Subject, s.peerHosts())
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
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// handshake runs one incoming connection's handshake and hands it to
// Accept.
func (s *StreamLayer) handshake(c net.Conn) {
	defer s.wg.Done()
	tc := tls.Server(c, s.server)
	ctx, cancel := context.WithTimeout(s.ctx, HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		_ = c.Close()
		s.logRefusal(c.RemoteAddr(), err)
		return
	}
	select {
	case s.conns <- tc:
	case <-s.closed:
		_ = tc.Close()
	}
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

// Accept returns the next verified peer connection.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
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

// Dial connects to a peer and verifies that its certificate names the host
// dialed and one of the group's hosts.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		return nil, err
	}
	cfg := s.client.Clone()
	cfg.ServerName = host
	if !slices.Contains(s.peerHosts(), host) {
		return nil, fmt.Errorf("peertls: %s is not a raft address of the group", address)
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", string(address))
}

var _ raft.StreamLayer = (*StreamLayer)(nil)
