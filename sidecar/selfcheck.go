package sidecar

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// advertisedCheckTimeout bounds the check of the advertised admin address
// at start (checkAdvertisedAdmin): the dial, then the wait for the
// connection to arrive.
const advertisedCheckTimeout = 3 * time.Second

// selfCheckMagic opens what the check sends before its nonce. Its first
// byte makes a Kafka server that gets it instead (another sidecar's admin
// endpoint, a broker) read a negative request size and drop the connection.
var selfCheckMagic = []byte("\xffsidemirror-advertised-check:")

// checkAdvertisedAdmin checks that the advertised admin address reaches
// this sidecar: it dials advertised, sends a random nonce, and accepts on
// ln, this sidecar's bound admin listener (not served yet), until the
// connection carrying the nonce arrives. An address that is routable but
// another host's, another sidecar's or a broker's would let the other
// sidecars' liveness probes, forwarded writes and describe fan-out reach
// the wrong process, silently: a connection that is made but never
// arrives is refused with a ConfigError naming admin.advertised.listener.
// An address this host cannot dial at all (a NAT without hairpin, a
// firewall) proves nothing: that is logged as a warning and passes.
//
// Other clients may connect while the check accepts; their connections,
// with what the check read of them, are handed to the admin server by the
// returned listener, which replaces ln.
func checkAdvertisedAdmin(c Config, ln net.Listener, advertised string, timeout time.Duration, log *zap.Logger) (net.Listener, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ln, nil
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("sidecar: nonce for the %s check: %w", KeyAdminAdvertised, err)
	}
	want := append(append([]byte(nil), selfCheckMagic...), nonce...)
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("tcp", advertised, timeout)
	if err != nil {
		log.Warn("the advertised admin address cannot be reached from this host, so it cannot be checked; the other sidecars must reach it",
			zap.String(KeyAdminAdvertised, advertised), zap.Error(err))
		return ln, nil
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(deadline)
	if _, err := conn.Write(want); err != nil {
		log.Warn("the advertised admin address cannot be checked: writing to it failed",
			zap.String(KeyAdminAdvertised, advertised), zap.Error(err))
		return ln, nil
	}

	replay := &replayListener{Listener: ln}
	_ = tl.SetDeadline(deadline)
	defer tl.SetDeadline(time.Time{}) //nolint:errcheck // the server's Accept needs no deadline
	for {
		accepted, err := tl.Accept()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			replay.closeQueued()
			return nil, configErr(KeyAdminAdvertised, "%q reaches another process, not this sidecar: a connection to it was accepted, but it did not arrive at %s %q within %v (set it to an address of this host where %s listens, e.g. %s)",
				advertised, KeyAdminListener, c.AdminListener, timeout, KeyAdminListener, c.exampleAddr(portOf(ln.Addr().String())))
		}
		if err != nil {
			replay.closeQueued()
			return nil, fmt.Errorf("%w: %s %s: %v", ErrListen, KeyAdminListener, ln.Addr(), err)
		}
		// Read what the connection sends first, as much as the check
		// sends, for a moment at most: a client of the admin endpoint
		// sends a request and waits for the answer.
		got := make([]byte, len(want))
		_ = accepted.SetReadDeadline(time.Now().Add(min(200*time.Millisecond, time.Until(deadline)+time.Millisecond)))
		n, _ := io.ReadFull(accepted, got)
		_ = accepted.SetReadDeadline(time.Time{})
		if n == len(want) && bytes.Equal(got, want) {
			accepted.Close()
			log.Debug("the advertised admin address reaches this sidecar", zap.String(KeyAdminAdvertised, advertised))
			return replay, nil
		}
		replay.push(&prefixConn{Conn: accepted, prefix: got[:n]})
	}
}

// replayListener hands out the connections queued by the check before it
// accepts new ones.
type replayListener struct {
	net.Listener
	mu     sync.Mutex
	queued []net.Conn
}

func (l *replayListener) push(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queued = append(l.queued, c)
}

// Accept returns the queued connections first.
func (l *replayListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.queued) > 0 {
		c := l.queued[0]
		l.queued = l.queued[1:]
		l.mu.Unlock()
		return c, nil
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// Close closes the listener and the connections still queued.
func (l *replayListener) Close() error {
	l.closeQueued()
	return l.Listener.Close()
}

func (l *replayListener) closeQueued() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.queued {
		c.Close()
	}
	l.queued = nil
}

// prefixConn is a connection whose first bytes were read already: Read
// returns them first.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
