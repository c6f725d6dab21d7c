package protocol

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
)

// This file is the server side of a connection's authentication, as a
// Kafka broker's listener does it (DESIGN D15):
//
//   - on a SASL listener (the SASL option), a connection may send only
//     ApiVersions, SaslHandshake (v1) and SaslAuthenticate until its
//     exchange succeeded; any other request closes it, as Kafka closes a
//     connection that sends a request before authenticating. A failed
//     exchange is answered with SASL_AUTHENTICATION_FAILED and closes the
//     connection. Internal APIs (API.Internal) are exempt: they are spoken
//     by peer sidecars, whose identity is the peer layer's to check;
//   - a connection from a sidecar peer (ConnInfo.Peer, authenticated by
//     the peer listener's mutual TLS) is PeerPrincipal and needs no SASL;
//   - on a TLS listener, the principal of a connection without SASL is the
//     one TLSPrincipal forms from its certificate;
//   - otherwise the principal is User:ANONYMOUS.

// Anonymous is the principal of a connection that did not authenticate, as
// Kafka names it.
const Anonymous = "User:ANONYMOUS"

// Kafka error codes of the SASL APIs.
const (
	codeUnsupportedSASLMechanism int16 = 33
	codeIllegalSASLState         int16 = 34
	codeSASLAuthenticationFailed int16 = 58
)

// SASLAuthenticator checks SASL exchanges of a listener.
type SASLAuthenticator interface {
	// Mechanisms returns the enabled mechanisms, such as PLAIN and
	// SCRAM-SHA-512.
	Mechanisms() []string
	// Begin starts the exchange of a connection that chose mechanism (one
	// of Mechanisms).
	Begin(ctx context.Context, mechanism string) (SASLExchange, error)
}

// SASLExchange is one connection's SASL exchange.
type SASLExchange interface {
	// Step takes the client's next token and returns the server's answer.
	// done reports that the exchange succeeded, principal is then the
	// connection's principal (User:<name>). An error fails the exchange;
	// its text goes to the client and must hold no secret.
	Step(ctx context.Context, token []byte) (challenge []byte, principal string, done bool, err error)
	// Close releases the exchange; it is called once, when it ends or the
	// connection closes.
	Close()
}

// SASL makes the listeners of the server require a SASL exchange with a
// (SASL_PLAINTEXT and SASL_SSL).
func SASL(a SASLAuthenticator) ServerOpt {
	return func(c *serverConfig) { c.sasl = a }
}

// TLSPrincipal sets how the principal of a TLS connection without SASL is
// formed from its handshake (security.ServerTLS.Principal); an error
// closes the connection.
func TLSPrincipal(f func(tls.ConnectionState) (string, error)) ServerOpt {
	return func(c *serverConfig) { c.tlsPrincipal = f }
}

// connAuth is the authentication state of one connection.
type connAuth struct {
	tls           *tls.ConnectionState // ConnInfo.TLS
	peer          *PeerIdentity        // ConnInfo.Peer
	principal     string
	authenticated bool // the SASL exchange succeeded, or no SASL is required
	exch          SASLExchange
	mechanism     string
}

func (a *connAuth) close() {
	if a.exch != nil {
		a.exch.Close()
		a.exch = nil
	}
}

// PeerPrincipal is the principal of a connection from the sidecar peer
// with brokerID, authenticated by the peer listener's mutual TLS. Peers
// need no SASL exchange: their certificate is their authentication.
func PeerPrincipal(brokerID int32) string { return fmt.Sprintf("User:sidecar-%d", brokerID) }

// newConnAuth forms the initial state of a connection from what
// connSecurity found (its TLS state after the handshake, its peer
// identity): the one place a connection's principal is derived before
// SASL. A sidecar peer is PeerPrincipal and authenticated; a TLS
// connection on a listener without SASL is the principal TLSPrincipal
// forms from its certificate; any other connection is User:ANONYMOUS, and
// on a SASL listener has to authenticate.
func (s *Server) newConnAuth(state *tls.ConnectionState, peer *PeerIdentity) (*connAuth, error) {
	a := &connAuth{tls: state, peer: peer, principal: Anonymous, authenticated: s.cfg.sasl == nil}
	switch {
	case peer != nil:
		a.principal, a.authenticated = PeerPrincipal(peer.BrokerID), true
	case state != nil && s.cfg.tlsPrincipal != nil && s.cfg.sasl == nil:
		p, err := s.cfg.tlsPrincipal(*state)
		if err != nil {
			return nil, err
		}
		a.principal = p
	}
	return a, nil
}

// errCloseAfterResponse makes serveOne write the response and then close
// the connection.
var errCloseAfterResponse = errors.New("close after response")

// serveAuth answers the SASL requests and refuses requests that come before
// the exchange succeeded. It returns a response for the SASL APIs, or nil
// to let req through; a non-nil error closes the connection (after writing
// the response, if there is one).
func (s *Server) serveAuth(a *connAuth, api API, req Request, log *zap.Logger) (Response, error) {
	switch r := req.(type) {
	case *SaslHandshakeRequest:
		resp := r.ResponseKind().(*SaslHandshakeResponse)
		switch {
		case s.cfg.sasl == nil:
			resp.ErrorCode = codeUnsupportedSASLMechanism
			log.Info("closing admin connection: SaslHandshake on a listener without SASL")
			return resp, errCloseAfterResponse
		case a.authenticated || a.exch != nil:
			resp.ErrorCode = codeIllegalSASLState
			log.Info("closing admin connection: a second SaslHandshake")
			return resp, errCloseAfterResponse
		}
		resp.SupportedMechanisms = s.cfg.sasl.Mechanisms()
		if !slices.Contains(resp.SupportedMechanisms, r.Mechanism) {
			resp.ErrorCode = codeUnsupportedSASLMechanism
			log.Info("closing admin connection: SASL mechanism not enabled", zap.String("mechanism", r.Mechanism))
			return resp, errCloseAfterResponse
		}
		exch, err := s.cfg.sasl.Begin(s.ctx, r.Mechanism)
		if err != nil {
			resp.ErrorCode = codeUnsupportedSASLMechanism
			log.Warn("closing admin connection: SASL exchange could not start", zap.String("mechanism", r.Mechanism), zap.Error(err))
			return resp, errCloseAfterResponse
		}
		a.exch, a.mechanism = exch, r.Mechanism
		return resp, nil
	case *SaslAuthenticateRequest:
		resp := r.ResponseKind().(*SaslAuthenticateResponse)
		if a.exch == nil {
			resp.ErrorCode = codeIllegalSASLState
			msg := "SaslAuthenticate before SaslHandshake, or after the exchange ended"
			resp.ErrorMessage = &msg
			log.Info("closing admin connection: " + msg)
			return resp, errCloseAfterResponse
		}
		challenge, principal, done, err := a.exch.Step(s.ctx, r.SASLAuthBytes)
		if err != nil {
			a.close()
			resp.ErrorCode = codeSASLAuthenticationFailed
			msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + a.mechanism
			resp.ErrorMessage = &msg
			log.Info("closing admin connection: SASL authentication failed", zap.String("mechanism", a.mechanism), zap.Error(err))
			return resp, errCloseAfterResponse
		}
		resp.SASLAuthBytes = challenge
		if done {
			a.close()
			a.authenticated, a.principal = true, principal
			log.Debug("admin connection authenticated", zap.String("principal", principal), zap.String("mechanism", a.mechanism))
		}
		return resp, nil
	}
	if !a.authenticated && !api.Internal && api.Key != KeyApiVersions {
		log.Info("closing admin connection: request before SASL authentication", zap.String("api", api.Name))
		return nil, errors.New("unauthenticated")
	}
	return nil, nil
}
