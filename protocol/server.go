package protocol

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Handler serves the requests of the admin endpoint. Handle is called
// sequentially per connection and concurrently across connections. It must
// return a new response of the request's API (req.ResponseKind() is a good
// start), not one shared between calls: the server sets its version to the
// request's. Kafka errors belong in the response's error codes. ctx is
// canceled when the server closes.
type Handler interface {
	Handle(ctx context.Context, c *ConnInfo, req Request) Response
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *ConnInfo, req Request) Response

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c *ConnInfo, req Request) Response {
	return f(ctx, c, req)
}

// ConnInfo describes the connection and header of one request.
type ConnInfo struct {
	RemoteAddr    net.Addr
	LocalAddr     net.Addr
	ClientID      string // the request header's client ID; empty when null
	CorrelationID int32
	// TLS is the connection's TLS state, nil on a plaintext connection;
	// TLS.PeerCertificates[0] is the verified client certificate, if any.
	TLS *tls.ConnectionState
	// Peer is the sidecar of the raft group the connection was
	// authenticated as by its listener (the peer listener with
	// peer.security.protocol=SSL), nil for every other client.
	Peer *PeerIdentity
	// Principal is who the connection authenticated as, as Kafka forms
	// principals: User:<name> after SASL, User:<mapped certificate DN> for
	// a TLS client certificate, PeerPrincipal for a sidecar peer, else
	// User:ANONYMOUS (sasl.go, connPrincipal).
	Principal string
}

// Server defaults.
const (
	DefaultMaxFrameBytes = 16 << 20         // 16 MiB, the largest request frame accepted
	DefaultReadTimeout   = 10 * time.Minute // as Kafka's connections.max.idle.ms
	DefaultWriteTimeout  = 30 * time.Second
)

type serverConfig struct {
	maxFrameBytes  int32
	logger         *zap.Logger
	readTimeout    time.Duration
	writeTimeout   time.Duration
	maxConnections int
	maxQueuedBytes int64
	peerAPIsOnly   bool
	sasl           SASLAuthenticator
	tlsPrincipal   func(tls.ConnectionState) (string, error)
}

// ServerOpt configures a Server.
type ServerOpt func(*serverConfig)

// MaxFrameBytes sets the largest request frame (size prefix excluded) the
// server accepts; a larger one closes its connection. n <= 0 restores
// DefaultMaxFrameBytes.
func MaxFrameBytes(n int32) ServerOpt {
	return func(c *serverConfig) {
		if n <= 0 {
			n = DefaultMaxFrameBytes
		}
		c.maxFrameBytes = n
	}
}

// Logger sets the logger; the server names it "protocol". The default
// discards everything.
func Logger(l *zap.Logger) ServerOpt {
	return func(c *serverConfig) {
		if l == nil {
			l = zap.NewNop()
		}
		c.logger = l
	}
}

// ReadTimeout sets how long a connection may take to deliver its next
// complete request, idle time included, before the server closes it. d <= 0
// disables the timeout.
func ReadTimeout(d time.Duration) ServerOpt {
	return func(c *serverConfig) { c.readTimeout = d }
}

// WriteTimeout sets how long writing one response may take. d <= 0 disables
// the timeout.
func WriteTimeout(d time.Duration) ServerOpt {
	return func(c *serverConfig) { c.writeTimeout = d }
}

// Server serves the admin endpoint's Kafka protocol on listeners: it reads
// size-prefixed frames, decodes headers and bodies with the registry,
// answers ApiVersions itself and passes every other request to its Handler.
// Per connection, requests are handled one at a time and answered in order.
// A connection that violates the protocol (oversized, negative or truncated
// frame, unknown API key, unsupported version, undecodable body) is logged
// with one warning and closed; other connections are not affected.
//
// Every goroutine the server starts is tracked; Close waits for all of them.
type Server struct {
	handler Handler
	cfg     serverConfig
	log     *zap.Logger
	ctx     context.Context // canceled by Close
	cancel  context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup // Serve loops and connection goroutines

	queued   *byteBudget // request bytes read and not yet answered
	overflow rateLimit   // connections refused by MaxConnections
	refusals rateLimit   // internal API requests refused by PeerAPIsOnly
}

// NewServer returns a server that passes requests to handler.
func NewServer(handler Handler, opts ...ServerOpt) *Server {
	cfg := serverConfig{
		maxFrameBytes:  DefaultMaxFrameBytes,
		logger:         zap.NewNop(),
		readTimeout:    DefaultReadTimeout,
		writeTimeout:   DefaultWriteTimeout,
		maxConnections: DefaultMaxConnections,
		maxQueuedBytes: DefaultMaxQueuedBytes,
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.maxQueuedBytes = max(cfg.maxQueuedBytes, int64(cfg.maxFrameBytes))
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		handler:   handler,
		cfg:       cfg,
		log:       cfg.logger.Named("protocol"),
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
		queued:    newByteBudget(cfg.maxQueuedBytes),
	}
}

// Serve accepts connections on l until Close, and then returns
// ErrServerClosed. It returns other errors of l.Accept that are not
// temporary. Serve closes l when it returns.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		_ = l.Close()
	}()

	s.log.Info("serving admin endpoint", zap.String("addr", l.Addr().String()))
	var backoff time.Duration
	var open atomic.Int32 // this listener's connections: MaxConnections is per listener
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if !errors.As(err, &te) || !te.Temporary() {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accepting admin connection failed; retrying",
				zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		if !s.startConn(c, &open) {
			_ = c.Close()
			return ErrServerClosed
		}
	}
}

// Close stops the server: it closes the listeners and connections, cancels
// the handlers' context and waits for every goroutine of the server. A
// handler that ignores its context delays Close.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	var errs []error
	for l := range s.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// startConn tracks c and starts its goroutine, unless the server is closed.
// A connection beyond MaxConnections of its listener (open counts them) is
// closed at once.
func (s *Server) startConn(c net.Conn, open *atomic.Int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if int(open.Load()) >= s.cfg.maxConnections {
		if s.overflow.allow() {
			s.log.Warn("refused admin connections: the limit of open connections is reached (admin.max.connections; logged at most every 10 s)",
				zap.Int("max-connections", s.cfg.maxConnections), zap.Int("refused", s.overflow.take()),
				zap.String("remote-addr", c.RemoteAddr().String()))
		}
		_ = c.Close() // after the log: the client sees the close, the log already holds the refusal
		return true
	}
	s.conns[c] = struct{}{}
	open.Add(1)
	s.wg.Add(1)
	go s.serveConn(c, open)
	return true
}

// serveConn serves one connection until it closes or violates the protocol.
func (s *Server) serveConn(c net.Conn, open *atomic.Int32) {
	defer s.wg.Done()
	defer open.Add(-1)
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	log := s.log.With(zap.String("remote-addr", c.RemoteAddr().String()))
	defer func() {
		if r := recover(); r != nil {
			log.Error("closing admin connection after a panic while serving it",
				zap.Any("panic", r), zap.StackSkip("stack", 1))
		}
	}()
	log.Debug("admin connection opened")
	state, peer, ok := s.connSecurity(c, log)
	if !ok {
		return
	}
	if peer != nil {
		log = log.With(zap.Int32("peer-broker-id", peer.BrokerID))
	}
	auth, err := s.newConnAuth(state, peer)
	if err != nil {
		log.Info("closing admin connection: no principal for its TLS client certificate", zap.Error(err))
		return
	}
	defer auth.close()
	for s.serveOne(c, auth, log) {
	}
}

// serveOne reads, handles and answers one request. It returns false when the
// connection must close, after logging why.
func (s *Server) serveOne(c net.Conn, auth *connAuth, log *zap.Logger) bool {
	frame, ok := s.readFrame(c, log)
	if !ok {
		return false
	}
	defer s.queued.release(int64(len(frame)))
	hdr, body, err := ReadRequestHeader(frame)
	if err != nil {
		log.Warn("closing admin connection: request header does not decode",
			zap.Int("frame-size", len(frame)), zap.Error(err))
		return false
	}
	key, version := hdr.RequestApiKey, hdr.RequestApiVersion
	log = log.With(zap.Int16("api-key", key), zap.Int16("api-version", version),
		zap.Int32("correlation-id", hdr.CorrelationId))
	api, ok := LookupAPI(key)
	if !ok {
		log.Warn("closing admin connection: unknown api key", zap.Int("frame-size", len(frame)))
		return false
	}
	if !api.SupportsVersion(version) {
		if key == KeyApiVersions && version > api.MaxVersion {
			// KIP-511: answer with v0 so the client can retry with a version
			// we support.
			resp := NewApiVersionsResponse()
			resp.ErrorCode = 35 // UNSUPPORTED_VERSION
			resp.ApiKeys = []ApiVersionsKey{{ApiKey: api.Key, MinVersion: api.MinVersion, MaxVersion: api.MaxVersion}}
			log.Debug("answering ApiVersions of an unsupported version with v0")
			return s.writeResponse(c, log, key, 0, hdr.CorrelationId, resp)
		}
		log.Warn("closing admin connection: unsupported api version",
			zap.String("api", api.Name), zap.Int16("min-version", api.MinVersion),
			zap.Int16("max-version", api.MaxVersion))
		return false
	}
	req := api.NewRequest()
	req.SetVersion(version)
	if err := req.ReadFrom(body); err != nil {
		log.Warn("closing admin connection: request body does not decode",
			zap.String("api", api.Name), zap.Int("frame-size", len(frame)), zap.Error(err))
		return false
	}

	var resp Response
	authResp, authErr := s.serveAuth(auth, api, req, log)
	switch {
	case key == KeyApiVersions:
		resp = s.apiVersions()
	case authResp != nil:
		resp = authResp
	case authErr != nil:
		return false
	default:
		info := &ConnInfo{RemoteAddr: c.RemoteAddr(), LocalAddr: c.LocalAddr(), CorrelationID: hdr.CorrelationId,
			TLS: auth.tls, Peer: auth.peer, Principal: auth.principal}
		if hdr.ClientId != nil {
			info.ClientID = *hdr.ClientId
		}
		if refusal, refused := s.refuseInternal(api, info, req, log); refused {
			if refusal == nil {
				return false
			}
			resp = refusal
		} else {
			resp = s.handler.Handle(s.ctx, info, req)
		}
	}
	if resp == nil || resp.Key() != key {
		log.Error("closing admin connection: handler returned a bad response",
			zap.String("api", api.Name), zap.Error(ErrBadResponse))
		return false
	}
	return s.writeResponse(c, log, key, version, hdr.CorrelationId, resp) && authErr == nil
}

// readFrame reads one size-prefixed frame. It returns false when the
// connection must close, after logging why.
func (s *Server) readFrame(c net.Conn, log *zap.Logger) ([]byte, bool) {
	if s.cfg.readTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.readTimeout))
	}
	var sizeBuf [4]byte
	if n, err := io.ReadFull(c, sizeBuf[:]); err != nil {
		switch {
		case n == 0 && errors.Is(err, io.EOF):
			log.Debug("admin connection closed by the client")
		case errors.Is(err, io.ErrUnexpectedEOF):
			log.Warn("closing admin connection: truncated frame size", zap.Int("bytes-read", n),
				zap.Error(ErrTruncatedFrame))
		default:
			s.logReadError(log, "waiting for a request", err)
		}
		return nil, false
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	switch {
	case size < 0:
		log.Warn("closing admin connection: negative frame size", zap.Int32("frame-size", size),
			zap.Error(ErrInvalidFrameSize))
		return nil, false
	case size > s.cfg.maxFrameBytes:
		log.Warn("closing admin connection: frame too large", zap.Int32("frame-size", size),
			zap.Int32("max-frame-bytes", s.cfg.maxFrameBytes), zap.Error(ErrFrameTooLarge))
		return nil, false
	}
	// Wait until the request fits MaxQueuedBytes (released by serveOne
	// once answered), then grow the buffer as bytes arrive, so a size
	// prefix alone does not allocate a large buffer.
	if !s.queued.acquire(s.ctx, int64(size)) {
		return nil, false
	}
	buf := make([]byte, 0, min(int(size), 64<<10))
	for len(buf) < int(size) {
		if len(buf) == cap(buf) {
			buf = append(make([]byte, 0, min(2*cap(buf), int(size))), buf...)
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < int(size) {
			s.queued.release(int64(size))
			if errors.Is(err, io.EOF) {
				log.Warn("closing admin connection: truncated frame", zap.Int32("frame-size", size),
					zap.Int("bytes-read", len(buf)), zap.Error(ErrTruncatedFrame))
			} else {
				s.logReadError(log, "reading a request", err)
			}
			return nil, false
		}
	}
	return buf, true
}

// logReadError logs a read error that is not a protocol violation.
func (s *Server) logReadError(log *zap.Logger, doing string, err error) {
	var ne net.Error
	switch {
	case s.ctx.Err() != nil || errors.Is(err, net.ErrClosed):
		log.Debug("admin connection closed", zap.Error(err))
	case errors.As(err, &ne) && ne.Timeout():
		log.Info("closing admin connection: read timeout "+doing, zap.Duration("read-timeout", s.cfg.readTimeout))
	default:
		log.Info("closing admin connection: read failed "+doing, zap.Error(err))
	}
}

// writeResponse writes one response frame. It returns false when the
// connection must close, after logging why.
func (s *Server) writeResponse(c net.Conn, log *zap.Logger, key, version int16, correlationID int32, resp Response) bool {
	if resp.Version() != version {
		resp.SetVersion(version)
	}
	frame := make([]byte, 4, 64)
	frame = appendResponseHeader(frame, key, version, correlationID)
	frame = resp.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if s.cfg.writeTimeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.writeTimeout))
	}
	if _, err := c.Write(frame); err != nil {
		if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			log.Debug("admin connection closed while writing a response", zap.Error(err))
		} else {
			log.Info("closing admin connection: writing a response failed", zap.Error(err))
		}
		return false
	}
	return true
}

// apiVersions answers ApiVersions from the registry.
func (s *Server) apiVersions() *ApiVersionsResponse {
	resp := NewApiVersionsResponse()
	for _, a := range apis {
		resp.ApiKeys = append(resp.ApiKeys, ApiVersionsKey{ApiKey: a.Key, MinVersion: a.MinVersion, MaxVersion: a.MaxVersion})
	}
	return resp
}
