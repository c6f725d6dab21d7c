package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// This file is the plaintext raft transport's stream layer, bounded as
// every listener is (DESIGN D15): at most MaxConnections connections open
// (raft's transport gives each a 256 KiB read buffer), more closed when
// accepted; a connection that reads nothing for IdleTimeout is closed.
// With peer.security.protocol=SSL the stream layer is internal/peertls's
// instead, with the same bounds. It also holds the check that a new member
// answers before it is added (probeMember).

// Defaults of the raft listener's bounds.
const (
	DefaultMaxConnections = 256
	DefaultIdleTimeout    = 10 * time.Minute
	probeTimeout          = 5 * time.Second
)

// AdvertisedAddr is a raft address as the operator wrote it: a host name
// stays a name, so that it equals this sidecar's entry in the group's
// configuration (raft.peers) and is resolved by whoever dials it. raft
// registers a node under its stream layer's Addr, which must therefore be
// the address the other members dial, not the bound one.
type AdvertisedAddr string

func (a AdvertisedAddr) Network() string { return "tcp" }
func (a AdvertisedAddr) String() string  { return string(a) }

// checkAdvertised refuses an advertised address the other members cannot
// dial: not host:port, an empty host or a wildcard address such as 0.0.0.0
// or [::].
func checkAdvertised(advertise string) error {
	host, _, err := net.SplitHostPort(advertise)
	if err != nil {
		return fmt.Errorf("%w: AdvertiseAddr %q is not host:port: %w", ErrInvalidNodeConfig, advertise, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%w: AdvertiseAddr %q is a wildcard address, which the other members cannot dial; give this host's address", ErrInvalidNodeConfig, advertise)
	}
	return nil
}

// tcpStream is a raft.StreamLayer over plain TCP with bounds.
type tcpStream struct {
	ln        net.Listener
	advertise AdvertisedAddr
	max       int
	idle      time.Duration
	log       *zap.Logger
	open      atomic.Int32

	mu          sync.Mutex
	lastRefusal time.Time
	refused     int
}

func listenTCP(bind, advertise string, max int, idle time.Duration, log *zap.Logger) (*tcpStream, error) {
	if err := checkAdvertised(advertise); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &tcpStream{ln: ln, advertise: AdvertisedAddr(advertise), max: max, idle: idle, log: log}, nil
}

// Accept returns the next connection within the bound.
func (s *tcpStream) Accept() (net.Conn, error) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		if int(s.open.Load()) >= s.max {
			_ = c.Close()
			s.refusal(c.RemoteAddr())
			continue
		}
		s.open.Add(1)
		return &idleConn{Conn: c, idle: s.idle, onClose: func() { s.open.Add(-1) }}, nil
	}
}

func (s *tcpStream) refusal(from net.Addr) {
	s.mu.Lock()
	s.refused++
	if time.Since(s.lastRefusal) < 10*time.Second {
		s.mu.Unlock()
		return
	}
	n := s.refused
	s.refused, s.lastRefusal = 0, time.Now()
	s.mu.Unlock()
	s.log.Warn("refused raft connections: the limit of open connections is reached (raft.max.connections; logged at most every 10 s)",
		zap.Int("max-connections", s.max), zap.Int("refused", n), zap.Stringer("remote-addr", from))
}

func (s *tcpStream) Close() error   { return s.ln.Close() }
func (s *tcpStream) Addr() net.Addr { return s.advertise }

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// idleConn closes after idle without data; Close runs onClose once.
type idleConn struct {
	net.Conn
	idle      time.Duration
	onClose   func()
	closeOnce sync.Once
}

func (c *idleConn) Read(b []byte) (int, error) {
	if c.idle > 0 {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Read(b)
}

func (c *idleConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(c.onClose)
	return err
}

// probeMember checks, before broker id is added at addr, that a sidecar
// answers there (with peer TLS: one whose certificate names id), so that a
// typo or a sidecar not started yet cannot become a voter that never
// votes: with two voters, or with a second member down, such a voter takes
// the group's quorum away for good, since removing it needs a quorum too.
func (n *Node) probeMember(ctx context.Context, id int32, addr string) error {
	probe := n.cfg.Probe
	if probe == nil {
		if n.cfg.Transport != nil {
			return nil // raft's in-memory transport of the tests
		}
		probe = func(ctx context.Context, _ int32, addr string) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		}
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := probe(pctx, id, addr); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", probeTimeout)
		}
		return memberErr(ErrInvalidMember, "broker %d cannot be added at raft address %s: %v; start its sidecar with raft.listener %s first (and, with peer.security.protocol=SSL, a certificate naming broker %d), then add it",
			id, addr, err, addr, id)
	}
	return nil
}
