package raftnode

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// advertisedAddr is a raft address as the operator wrote it: a host name
// stays a name, so that it equals this sidecar's entry in the group's
// configuration (raft.peers) and is resolved by whoever dials it.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// tcpStreamLayer is raft's plain TCP stream layer. Unlike raft's own
// TCPStreamLayer, which takes the advertised address as a resolved
// *net.TCPAddr, it advertises the address unresolved: raft registers a
// node under its transport's LocalAddr, which must be the address the
// other members dial.
type tcpStreamLayer struct {
	ln        net.Listener
	advertise advertisedAddr
}

func (l *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

func (l *tcpStreamLayer) Accept() (net.Conn, error) { return l.ln.Accept() }
func (l *tcpStreamLayer) Close() error              { return l.ln.Close() }
func (l *tcpStreamLayer) Addr() net.Addr            { return l.advertise }

// newTCPTransport listens on bind and returns a network transport that
// advertises advertise, which must name a host the other members can dial:
// not empty and not a wildcard address such as 0.0.0.0 or [::].
func newTCPTransport(bind, advertise string, log hclog.Logger) (*raft.NetworkTransport, error) {
	host, _, err := net.SplitHostPort(advertise)
	if err != nil {
		return nil, fmt.Errorf("%w: AdvertiseAddr %q is not host:port: %w", ErrInvalidNodeConfig, advertise, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("%w: AdvertiseAddr %q is a wildcard address, which the other members cannot dial; give this host's address", ErrInvalidNodeConfig, advertise)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &tcpStreamLayer{ln: ln, advertise: advertisedAddr(advertise)},
		MaxPool: tcpMaxPool,
		Timeout: tcpTimeout,
		Logger:  log,
	}), nil
}
