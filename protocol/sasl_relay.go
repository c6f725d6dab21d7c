package protocol

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslRelay authenticates admin clients by relaying their SASL exchange to
// a SASL listener of the local broker (DESIGN D15): the sidecar opens a
// connection of its own to the broker per exchange, sends SaslHandshake
// with the client's mechanism, then passes every SaslAuthenticate token
// through and the broker's answers back. The broker checks the
// credentials against the destination cluster's users (PLAIN, SCRAM); the
// sidecar keeps no password database and never sees a SCRAM password. The
// principal is User:<the user name the client sent>, which is what Kafka's
// default principal builder forms for PLAIN and SCRAM; delegation tokens
// (SCRAM with tokenauth=true), whose principal is the token's owner, are
// refused.
type saslRelay struct {
	servers    []string
	tls        *tls.Config // nil: SASL_PLAINTEXT towards the broker
	mechanisms []string
}

// NewSASLRelay returns a SASLAuthenticator that relays exchanges of the
// mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) to the first of the
// broker addresses that answers, over TLS with tlsCfg unless it is nil.
func NewSASLRelay(servers []string, tlsCfg *tls.Config, mechanisms []string) SASLAuthenticator {
	return &saslRelay{servers: servers, tls: tlsCfg, mechanisms: mechanisms}
}

// relayTimeout bounds each round trip with the broker, dialing included.
const relayTimeout = 10 * time.Second

// maxRelayFrame bounds the broker's answers.
const maxRelayFrame = 1 << 20

var errRelayAuth = errors.New("authentication failed")

// Mechanisms implements SASLAuthenticator.
func (r *saslRelay) Mechanisms() []string { return r.mechanisms }

// Begin implements SASLAuthenticator: it connects to the broker
// and does the handshake.
func (r *saslRelay) Begin(ctx context.Context, mechanism string) (SASLExchange, error) {
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	var errs []error
	for _, addr := range r.servers {
		conn, err := r.dial(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e := &relayExchange{conn: conn, mechanism: mechanism}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, mechanism
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.Version = 1
		if err := e.roundTrip(hs, resp); err != nil {
			conn.Close()
			errs = append(errs, err)
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			conn.Close()
			return nil, fmt.Errorf("the local broker %s refused SASL mechanism %s: %w (it enables %v)", addr, mechanism, err, resp.SupportedMechanisms)
		}
		return e, nil
	}
	return nil, fmt.Errorf("relaying SASL to the local broker: %w", errors.Join(errs...))
}

func (r *saslRelay) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil || r.tls == nil {
		return conn, err
	}
	cfg := r.tls.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("TLS handshake with the local broker %s: %w", addr, err)
	}
	return tc, nil
}

// relayExchange is one exchange relayed over its own broker connection.
type relayExchange struct {
	conn      net.Conn
	mechanism string
	corr      int32
	round     int
	user      string
}

// rounds is how many SaslAuthenticate round trips the mechanism takes:
// PLAIN one, SCRAM two (client-first, client-final).
func rounds(mechanism string) int {
	if mechanism == "PLAIN" {
		return 1
	}
	return 2
}

// Step implements SASLExchange.
func (e *relayExchange) Step(_ context.Context, token []byte) ([]byte, string, bool, error) {
	if e.round == 0 {
		user, err := userOf(e.mechanism, token)
		if err != nil {
			return nil, "", false, err
		}
		e.user = user
	}
	if e.round >= rounds(e.mechanism) {
		return nil, "", false, fmt.Errorf("%w: the %s exchange has ended", errRelayAuth, e.mechanism)
	}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 1, token
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	if err := e.roundTrip(req, resp); err != nil {
		return nil, "", false, err
	}
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return nil, "", false, fmt.Errorf("%w: the local broker answered %v%s", errRelayAuth, kerr.ErrorForCode(resp.ErrorCode), msg)
	}
	e.round++
	if e.round == rounds(e.mechanism) {
		return resp.SASLAuthBytes, "User:" + e.user, true, nil
	}
	return resp.SASLAuthBytes, "", false, nil
}

// Close implements SASLExchange.
func (e *relayExchange) Close() { e.conn.Close() }

// roundTrip sends req and decodes the answer into resp (both of version 1,
// non-flexible: request header v1, response header v0).
func (e *relayExchange) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	_ = e.conn.SetDeadline(time.Now().Add(relayTimeout))
	e.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sidemirror-admin-relay")).AppendRequest(nil, req, e.corr)
	if _, err := e.conn.Write(frame); err != nil {
		return fmt.Errorf("relaying SASL to the local broker: %w", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(e.conn, size[:]); err != nil {
		return fmt.Errorf("relaying SASL to the local broker: %w", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxRelayFrame {
		return fmt.Errorf("relaying SASL to the local broker: answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(e.conn, body); err != nil {
		return fmt.Errorf("relaying SASL to the local broker: %w", err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != e.corr {
		return fmt.Errorf("relaying SASL to the local broker: correlation ID %d, want %d", corr, e.corr)
	}
	return resp.ReadFrom(body[4:])
}

// userOf returns the user name of a client's first token: PLAIN's
// authcid (an authzid must be empty or the same, as Kafka requires), or
// SCRAM's n= attribute from the client-first message.
func userOf(mechanism string, token []byte) (string, error) {
	if mechanism == "PLAIN" {
		parts := bytes.Split(token, []byte{0})
		if len(parts) != 3 || len(parts[1]) == 0 {
			return "", fmt.Errorf("%w: malformed PLAIN token", errRelayAuth)
		}
		if len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1]) {
			return "", fmt.Errorf("%w: PLAIN authorization ID differs from the user name", errRelayAuth)
		}
		return string(parts[1]), nil
	}
	// gs2-header "n,[a=authzid]," then "n=user,r=nonce[,extensions]".
	msg := string(token)
	gs2, rest, ok := strings.Cut(msg, ",")
	if !ok || (gs2 != "n" && gs2 != "y") {
		return "", fmt.Errorf("%w: malformed SCRAM client-first message", errRelayAuth)
	}
	authz, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return "", fmt.Errorf("%w: malformed SCRAM client-first message", errRelayAuth)
	}
	var user string
	for i, attr := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(attr, "=")
		switch {
		case i == 0 && k != "n":
			return "", fmt.Errorf("%w: SCRAM client-first message has no user name", errRelayAuth)
		case i == 0:
			user = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(v)
		case k == "tokenauth" && strings.EqualFold(v, "true"):
			return "", fmt.Errorf("%w: delegation tokens are not accepted by the admin endpoint", errRelayAuth)
		}
	}
	if user == "" || (authz != "" && authz != "a="+user) {
		return "", fmt.Errorf("%w: SCRAM user name missing or authorization ID differs", errRelayAuth)
	}
	return user, nil
}
