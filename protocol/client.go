package protocol

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
)

// Client defaults.
const (
	DefaultDialTimeout      = 10 * time.Second
	DefaultClientID         = "sidemirror"
	DefaultMaxResponseBytes = 100 << 20 // 100 MiB, as franz-go's BrokerMaxReadBytes
)

type clientConfig struct {
	dialTimeout      time.Duration
	clientID         string
	tlsConfig        *tls.Config
	maxResponseBytes int32
	dial             func(ctx context.Context, addr string) (net.Conn, error)
	sasl             sasl.Mechanism
}

// ClientOpt configures a Client.
type ClientOpt func(*clientConfig)

// DialTimeout bounds connecting (and the TLS handshake); d <= 0 means no
// bound beyond the context's. Default DefaultDialTimeout.
func DialTimeout(d time.Duration) ClientOpt {
	return func(c *clientConfig) { c.dialTimeout = d }
}

// ClientID sets the client ID sent in every request header. Default
// DefaultClientID.
func ClientID(id string) ClientOpt {
	return func(c *clientConfig) { c.clientID = id }
}

// DialTLSConfig makes the client speak TLS with cfg; nil (the default) means
// plaintext. When cfg has no ServerName, the host of the address is used.
func DialTLSConfig(cfg *tls.Config) ClientOpt {
	return func(c *clientConfig) { c.tlsConfig = cfg }
}

// MaxResponseBytes sets the largest response frame accepted; n <= 0
// restores DefaultMaxResponseBytes.
func MaxResponseBytes(n int32) ClientOpt {
	return func(c *clientConfig) {
		if n <= 0 {
			n = DefaultMaxResponseBytes
		}
		c.maxResponseBytes = n
	}
}

// Client is a connection to an admin endpoint. Do is safe for concurrent
// use; requests are sent one at a time. A transport error breaks the client
// for good: Close it and Dial again.
type Client struct {
	addr string
	cfg  clientConfig

	mu   sync.Mutex
	conn net.Conn
	corr int32
	err  error // why the client cannot be used: closed or broken
}

// Dial connects to the admin endpoint at addr (host:port).
func Dial(ctx context.Context, addr string, opts ...ClientOpt) (*Client, error) {
	cfg := clientConfig{
		dialTimeout:      DefaultDialTimeout,
		clientID:         DefaultClientID,
		maxResponseBytes: DefaultMaxResponseBytes,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.dialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.dialTimeout)
		defer cancel()
	}
	var d net.Dialer
	dial := cfg.dial
	if dial == nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	conn, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if cfg.tlsConfig != nil {
		tc := cfg.tlsConfig.Clone()
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		tlsConn := tls.Client(conn, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tlsConn
	}
	cl := &Client{addr: addr, cfg: cfg, conn: conn}
	if cfg.sasl != nil {
		if err := cl.authenticate(ctx, cfg.sasl); err != nil {
			_ = cl.Close()
			return nil, fmt.Errorf("authenticating to %s: %w", addr, err)
		}
	}
	return cl, nil
}

// Addr returns the address the client dialed.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection. Do returns ErrClientClosed afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		if errors.Is(c.err, ErrClientClosed) {
			return nil
		}
		c.err = ErrClientClosed
		return nil // the connection was closed when it broke
	}
	c.err = ErrClientClosed
	return c.conn.Close()
}

// pastDeadline is a deadline in the past, to interrupt blocked I/O.
var pastDeadline = time.Unix(1, 0)

// Do sends req and returns its response. Error codes in the response are
// not Go errors: callers inspect them (see ErrorFor). Do returns an error for
// a request the registry does not support, for transport failures (which
// also break the client), for a canceled ctx, and for a response that does
// not decode.
func (c *Client) Do(ctx context.Context, req Request) (Response, error) {
	key, version := req.Key(), req.Version()
	api, ok := LookupAPI(key)
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownAPIKey, key)
	}
	if !api.SupportsVersion(version) {
		return nil, fmt.Errorf("%w: %s v%d (supported %d-%d)", ErrUnsupportedVersion, api.Name, version, api.MinVersion, api.MaxVersion)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		if errors.Is(c.err, ErrClientClosed) {
			return nil, ErrClientClosed
		}
		return nil, fmt.Errorf("%w: connection to %s broke earlier: %w", ErrClientClosed, c.addr, c.err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	c.corr++
	clientID := c.cfg.clientID
	hdr := RequestHeader{RequestApiKey: key, RequestApiVersion: version, CorrelationId: c.corr, ClientId: &clientID}
	frame := make([]byte, 4, 64)
	frame = hdr.AppendTo(frame)
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))

	// I/O is interrupted only once ctx is done, so that an interrupted
	// exchange always reports ctx's error.
	_ = c.conn.SetDeadline(time.Time{})
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.conn.SetDeadline(pastDeadline)
		close(interrupted)
	})
	defer func() {
		if !stop() {
			<-interrupted // never let it touch the next exchange's deadline
		}
	}()

	fail := func(doing string, err error) (Response, error) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		c.err = fmt.Errorf("%s %s request: %w", doing, api.Name, err)
		_ = c.conn.Close()
		return nil, c.err
	}
	if _, err := c.conn.Write(frame); err != nil {
		return fail("writing", err)
	}
	var sizeBuf [4]byte
	if _, err := io.ReadFull(c.conn, sizeBuf[:]); err != nil {
		return fail("reading response to", err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	switch {
	case size < 4:
		return fail("reading response to", fmt.Errorf("%w: %d", ErrInvalidFrameSize, size))
	case size > c.cfg.maxResponseBytes:
		return fail("reading response to", fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, size, c.cfg.maxResponseBytes))
	}
	resp := make([]byte, size)
	if _, err := io.ReadFull(c.conn, resp); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %w", ErrTruncatedFrame, err)
		}
		return fail("reading response to", err)
	}
	corr, body, err := readResponseHeader(resp, key, version)
	if err != nil {
		return fail("reading response to", err)
	}
	if corr != c.corr {
		return fail("reading response to", fmt.Errorf("%w: got %d, want %d", ErrCorrelationMismatch, corr, c.corr))
	}

	r := req.ResponseKind()
	r.SetVersion(version)
	if key == KeyApiVersions && len(body) >= 2 && binary.BigEndian.Uint16(body) == 35 {
		r.SetVersion(0) // KIP-511: the server did not know our version and answered with v0
	}
	if err := r.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %s response from %s: %w", api.Name, c.addr, err)
	}
	return r, nil
}
