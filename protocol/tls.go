package protocol

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// This file holds what the server knows of a connection's security: its
// TLS state, the sidecar peer it was authenticated as, and the refusal of
// the internal APIs to anyone else when peer security is on.

// TLSHandshakeTimeout bounds the TLS handshake of an admin connection.
const TLSHandshakeTimeout = 10 * time.Second

// PeerIdentity is a sidecar of the raft group, authenticated by the
// listener that accepted the connection (internal/peertls: mutual TLS, the
// certificate tied to the broker ID).
type PeerIdentity struct {
	BrokerID int32
}

// peerConn is implemented by connections of authenticated peers
// (*peertls.Conn).
type peerConn interface{ PeerBrokerID() int32 }

// handshaker is implemented by *tls.Conn and connections embedding one.
type handshaker interface {
	HandshakeContext(ctx context.Context) error
	ConnectionState() tls.ConnectionState
}

// TLSListener returns a listener whose connections speak TLS with cfg; the
// server runs each handshake on the connection's own goroutine, bounded by
// TLSHandshakeTimeout, and puts the verified client certificate in
// ConnInfo.TLS.
func TLSListener(l net.Listener, cfg *tls.Config) net.Listener { return tls.NewListener(l, cfg) }

// connSecurity completes the TLS handshake of a TLS connection and returns
// what ConnInfo reports of the connection's security. ok is false when the
// handshake failed (logged).
func (s *Server) connSecurity(c net.Conn, log *zap.Logger) (state *tls.ConnectionState, peer *PeerIdentity, ok bool) {
	if h, isTLS := c.(handshaker); isTLS {
		ctx, cancel := context.WithTimeout(s.ctx, TLSHandshakeTimeout)
		err := h.HandshakeContext(ctx)
		cancel()
		if err != nil {
			log.Info("closing admin connection: TLS handshake failed", zap.Error(err))
			return nil, nil, false
		}
		cs := h.ConnectionState()
		state = &cs
	}
	if p, isPeer := c.(peerConn); isPeer {
		peer = &PeerIdentity{BrokerID: p.PeerBrokerID()}
	}
	return state, peer, true
}

// PeerAPIsOnly makes the server refuse the internal APIs (ApplyCommand,
// Read/WriteMirrorStates, DescribeLocalPartitions) on connections without
// a PeerIdentity: with peer security on, only the peer listener serves
// them. The refusal is CLUSTER_AUTHORIZATION_FAILED, logged at most every
// 10 seconds.
func PeerAPIsOnly(on bool) ServerOpt {
	return func(c *serverConfig) { c.peerAPIsOnly = on }
}

// refuseInternal reports whether an internal API request comes from a
// connection that is not an authenticated peer while PeerAPIsOnly is on,
// and returns the response that refuses it (nil: close the connection).
func (s *Server) refuseInternal(api API, info *ConnInfo, req Request, log *zap.Logger) (Response, bool) {
	if !s.cfg.peerAPIsOnly || !api.Internal || info.Peer != nil {
		return nil, false
	}
	msg := api.Name + " is served to the sidecars of the raft group only, on their peer listener (peer.security.protocol=SSL)"
	code := kerr.ClusterAuthorizationFailed.Code
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *ApplyCommandResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
	case *ReadMirrorStatesResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
	case *WriteMirrorStatesResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
	case *DescribeLocalPartitionsResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
	default:
		resp = nil // an internal API without an error code: the connection closes
	}
	if s.refusals.allow() {
		log.Warn("refused an internal API request from a client that is not an authenticated sidecar peer (logged at most every 10 s)",
			zap.String("api", api.Name), zap.Int("refused", s.refusals.take()))
	}
	return resp, true
}

// DialFunc makes the client connect with dial instead of TCP to addr: for
// sidecars, the peer listener's authenticated connections
// (peertls.StreamLayer.DialPeerAPI). DialTLSConfig still applies on top.
func DialFunc(dial func(ctx context.Context, addr string) (net.Conn, error)) ClientOpt {
	return func(c *clientConfig) { c.dial = dial }
}
