package sidecar

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/internal/peertls"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file holds the keys of peer security (the raft group and the
// internal APIs between sidecars, DESIGN D15) and of the listeners'
// bounds, builds the peer stream layer from them, and bounds
// http.listener's connections.

// Keys of peer security and of the listeners' bounds.
const (
	KeyPeerSecurityProtocol  = "peer.security.protocol"
	KeyAdminMaxConnections   = "admin.max.connections"
	KeyAdminQueuedMaxBytes   = "admin.queued.max.request.bytes"
	KeyRaftMaxConnections    = "raft.max.connections"
	KeyConnectionsMaxIdle    = "connections.max.idle.ms"
	PeerPrefix               = "peer."
	keyPeerPrincipalMapping  = PeerPrefix + "ssl.principal.mapping.rules"
	peerProtocolPlaintext    = "PLAINTEXT"
	peerProtocolSSL          = "SSL"
	peerClientAuthKey        = "ssl.client.auth"
	maxConnectionsUpperBound = 100_000
)

// DefaultPeerPrincipalMappingRules maps a peer certificate's subject to
// the broker ID it names: the number in a CN of the form
// "sidecar-<broker ID>", wherever the CN stands in the subject.
const DefaultPeerPrincipalMappingRules = `RULE:^(?:.*,)?CN=sidecar-([0-9]+)(?:,.*)?$/$1/`

// PeerSecurity is how the sidecars of the raft group authenticate each
// other (peer.*).
type PeerSecurity struct {
	// Protocol is peer.security.protocol: PLAINTEXT (the default: raft and
	// the internal APIs unauthenticated) or SSL (mutual TLS).
	Protocol string
	// TLS holds peer.ssl.*: this sidecar's key store, the trust store of
	// the operator's CA, and peer.ssl.principal.mapping.rules, which turn a
	// certificate's subject into the broker ID it belongs to. Client
	// certificates are always required.
	TLS security.ListenerTLS
}

// Limits bounds the listeners.
type Limits struct {
	AdminMaxConnections int           // admin.max.connections
	AdminQueuedBytes    int64         // admin.queued.max.request.bytes
	RaftMaxConnections  int           // raft.max.connections
	IdleTimeout         time.Duration // connections.max.idle.ms
}

// SSL reports whether peer security is on.
func (p PeerSecurity) SSL() bool { return strings.EqualFold(p.Protocol, peerProtocolSSL) }

func defaultPeerSecurity() PeerSecurity {
	l := security.DefaultListenerTLS(PeerPrefix)
	l.ClientAuth = security.ClientAuthRequired
	l.PrincipalMappingRules = DefaultPeerPrincipalMappingRules
	return PeerSecurity{Protocol: peerProtocolPlaintext, TLS: l}
}

func defaultLimits() Limits {
	return Limits{
		AdminMaxConnections: protocol.DefaultMaxConnections,
		AdminQueuedBytes:    protocol.DefaultMaxQueuedBytes,
		RaftMaxConnections:  raftnode.DefaultMaxConnections,
		IdleTimeout:         raftnode.DefaultIdleTimeout,
	}
}

// peerSSLKeys are the peer.ssl.* settings, without the prefix.
var peerSSLKeys = slices.DeleteFunc(slices.Clone(security.ListenerKeys), func(k string) bool { return k == peerClientAuthKey })

func init() {
	fields = append(fields,
		field{KeyPeerSecurityProtocol, "", func(c *Config, v string) error { c.Peer.Protocol = v; return nil }},
	)
	for _, name := range peerSSLKeys {
		fields = append(fields, field{PeerPrefix + name, "", func(c *Config, v string) error {
			*c.Peer.TLS.Field(name) = v
			return nil
		}})
	}
	intKey := func(key, expected string, set func(c *Config, n int64)) field {
		return field{key, "", func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return configErr(key, "%q is not an integer (expected %s)", v, expected)
			}
			set(c, n)
			return nil
		}}
	}
	fields = append(fields,
		intKey(KeyAdminMaxConnections, "1 to 100000", func(c *Config, n int64) { c.Limits.AdminMaxConnections = int(n) }),
		intKey(KeyAdminQueuedMaxBytes, "bytes, at least 16777216", func(c *Config, n int64) { c.Limits.AdminQueuedBytes = n }),
		intKey(KeyRaftMaxConnections, "16 to 100000", func(c *Config, n int64) { c.Limits.RaftMaxConnections = int(n) }),
		intKey(KeyConnectionsMaxIdle, "milliseconds, at least 10000", func(c *Config, n int64) {
			c.Limits.IdleTimeout = time.Duration(n) * time.Millisecond
		}),
	)
}

// validatePeer checks peer.* and the bounds.
func (c Config) validatePeer() error {
	if _, err := security.ParsePrincipalMappingRules(keyPeerPrincipalMapping, c.Peer.TLS.PrincipalMappingRules); err != nil {
		return err
	}
	switch strings.ToUpper(c.Peer.Protocol) {
	case peerProtocolPlaintext:
	case peerProtocolSSL:
		if err := c.Peer.TLS.Validate(); err != nil {
			return err
		}
		if !c.Peer.TLS.Stores.HasTruststore() {
			return configErr(PeerPrefix+"ssl.truststore.location", "is missing, but %s is SSL (expected the operator's CA certificate that signs every sidecar's peer certificate)", KeyPeerSecurityProtocol)
		}
	default:
		return configErr(KeyPeerSecurityProtocol, "%q is not supported (expected PLAINTEXT or SSL)", c.Peer.Protocol)
	}
	l := c.Limits
	switch {
	case l.AdminMaxConnections < 1 || l.AdminMaxConnections > maxConnectionsUpperBound:
		return configErr(KeyAdminMaxConnections, "%d is out of range (expected 1 to %d)", l.AdminMaxConnections, maxConnectionsUpperBound)
	case l.AdminQueuedBytes < protocol.DefaultMaxFrameBytes:
		return configErr(KeyAdminQueuedMaxBytes, "%d is too small (expected at least %d, the largest request)", l.AdminQueuedBytes, protocol.DefaultMaxFrameBytes)
	case l.RaftMaxConnections < 16 || l.RaftMaxConnections > maxConnectionsUpperBound:
		return configErr(KeyRaftMaxConnections, "%d is out of range (expected 16 to %d: each peer keeps several connections)", l.RaftMaxConnections, maxConnectionsUpperBound)
	case l.IdleTimeout < 10*time.Second:
		return configErr(KeyConnectionsMaxIdle, "%d is too short (expected at least 10000 ms)", l.IdleTimeout.Milliseconds())
	}
	return nil
}

// redactedPeer returns peer.* and the bounds for Config.Redacted.
func (c Config) redactedPeer() []Property {
	props := []Property{{Key: KeyPeerSecurityProtocol, Value: c.Peer.Protocol}}
	for _, p := range c.Peer.TLS.Redacted() {
		if p.Key != PeerPrefix+peerClientAuthKey {
			props = append(props, p)
		}
	}
	return append(props,
		Property{Key: KeyAdminMaxConnections, Value: strconv.Itoa(c.Limits.AdminMaxConnections)},
		Property{Key: KeyAdminQueuedMaxBytes, Value: strconv.FormatInt(c.Limits.AdminQueuedBytes, 10)},
		Property{Key: KeyRaftMaxConnections, Value: strconv.Itoa(c.Limits.RaftMaxConnections)},
		Property{Key: KeyConnectionsMaxIdle, Value: strconv.FormatInt(c.Limits.IdleTimeout.Milliseconds(), 10)},
	)
}

// httpMaxConnections bounds http.listener's connections (/metrics and
// /healthz need few, but a client that holds slots must not blind the
// health checks easily: idle ones are closed after 10 s without a request).
const httpMaxConnections = 1000

// limitListener closes connections accepted beyond max open ones.
func limitListener(ln net.Listener, max int) net.Listener {
	return &boundedListener{Listener: ln, max: int32(max)}
}

type boundedListener struct {
	net.Listener
	max  int32
	open atomic.Int32
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
	}
}

type countedConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// peerLayer is the peer stream layer of peer.security.protocol=SSL and
// what the sidecar needs around it.
type peerLayer struct {
	stream *peertls.StreamLayer
	// node is set once the raft node is open; until then the members are
	// raft.peers.
	node func() *raftnode.Node
}

// newPeerLayer listens on raft.listener with mutual TLS.
func (s *Sidecar) newPeerLayer(node func() *raftnode.Node) (*peerLayer, error) {
	srv, err := s.cfg.Peer.TLS.NewServerTLS()
	if err != nil {
		return nil, err
	}
	mapper, err := security.ParsePrincipalMappingRules(keyPeerPrincipalMapping, s.cfg.Peer.TLS.PrincipalMappingRules)
	if err != nil {
		return nil, err
	}
	pl := &peerLayer{node: node}
	static := map[int32]string{}
	for _, p := range s.cfg.RaftMembers() {
		static[p.ID] = p.Address
	}
	members := func() map[int32]string {
		out := make(map[int32]string, len(static))
		for id, a := range static {
			out[id] = a
		}
		if n := pl.node(); n != nil {
			if ms, err := n.Members(); err == nil {
				for _, m := range ms {
					out[m.ID] = m.Address
				}
			}
		}
		return out
	}
	pl.stream, err = peertls.Listen(s.cfg.RaftListener, raftnode.AdvertisedAddr(s.cfg.RaftAdvertisedAddr()), peertls.Config{
		Server:         srv.Config(),
		Client:         srv.DialConfig(),
		Identify:       func(cs tls.ConnectionState) (int32, error) { return peerBrokerID(mapper, cs) },
		Members:        members,
		MaxConnections: s.cfg.Limits.RaftMaxConnections,
		IdleTimeout:    s.cfg.Limits.IdleTimeout,
		Logger:         s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %v", ErrListen, KeyRaftListener, s.cfg.RaftListener, err)
	}
	return pl, nil
}

// peerBrokerID is the broker ID a verified peer certificate names: its
// subject mapped by peer.ssl.principal.mapping.rules, which must give a
// broker ID.
func peerBrokerID(mapper *security.PrincipalMapper, cs tls.ConnectionState) (int32, error) {
	if len(cs.PeerCertificates) == 0 {
		return -1, fmt.Errorf("the peer sent no certificate")
	}
	dn := security.DistinguishedName(cs.PeerCertificates[0])
	name, err := mapper.Map(dn)
	if err != nil {
		return -1, err
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 {
		return -1, fmt.Errorf("the certificate subject %q maps to %q by %s, which is not a broker ID", dn, name, keyPeerPrincipalMapping)
	}
	return int32(id), nil
}

// dialPeerAPI connects to the internal APIs of the sidecar registered
// with adminAddr, through its peer listener; the connection is refused
// unless its certificate names that sidecar's broker ID.
func (pl *peerLayer) dialPeerAPI(ctx context.Context, adminAddr string) (net.Conn, error) {
	id, ok := pl.peerID(adminAddr)
	if !ok {
		return nil, fmt.Errorf("no sidecar of the raft group is registered with the admin address %s", adminAddr)
	}
	return pl.stream.DialPeerAPI(ctx, id)
}

// peerID returns the broker ID of the sidecar registered with adminAddr.
func (pl *peerLayer) peerID(adminAddr string) (int32, bool) {
	n := pl.node()
	if n == nil {
		return -1, false
	}
	id, ok := int32(-1), false
	n.FSM().Read(func(st *fsm.State) {
		for sid, sc := range st.Sidecars {
			if sc.AdminAddr == adminAddr {
				id, ok = sid, true
				return
			}
		}
	})
	return id, ok
}
