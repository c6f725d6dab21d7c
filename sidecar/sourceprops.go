package sidecar

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/internal/security"
)

// sourceClientKeys are the Kafka consumer properties of a mirror config,
// beyond bootstrap.servers and the security keys, that set options of the
// mirror's source client (the fetcher's and the metadata sync's). The fetch
// sizes (fetch.max.bytes and the like) are the coordinator's: they set the
// fetcher's requests and never reach SourceKgoOpts.
var sourceClientKeys = []string{
	"client.id", "connections.max.idle.ms", "metadata.max.age.ms", "receive.buffer.bytes", "request.timeout.ms",
	"retry.backoff.max.ms", "retry.backoff.ms", "send.buffer.bytes", "socket.connection.setup.timeout.ms",
	"ssl.enabled.protocols", "ssl.protocol",
}

// tlsVersions are the values of ssl.enabled.protocols and ssl.protocol.
var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// sourceClientOpts turns the sourceClientKeys of props (resolved values)
// into franz-go options that go after cc's (cc.KgoOpts): a later option
// wins.
func sourceClientOpts(props map[string]string, cc security.ClientConfig) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	ms := func(key string, least int64) (time.Duration, bool, error) {
		v, ok := props[key]
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < least || n > 1<<31-1 {
			return 0, false, configErr(key, "%q is not a number of milliseconds from %d to 2147483647", v, least)
		}
		return time.Duration(n) * time.Millisecond, true, nil
	}
	buffer := func(key string) (int, error) {
		v, ok := props[key]
		if !ok {
			return -1, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < -1 || n == 0 {
			return 0, configErr(key, "%q is not a buffer size in bytes (expected -1 for the operating system's, or a positive number)", v)
		}
		return n, nil
	}

	if v, ok := props["client.id"]; ok {
		if strings.TrimSpace(v) == "" {
			return nil, configErr("client.id", "is empty (remove it for the default, or name the client: source brokers apply quotas by client ID)")
		}
		opts = append(opts, kgo.ClientID(strings.TrimSpace(v)))
	}
	if d, ok, err := ms("request.timeout.ms", 1); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, kgo.RequestTimeoutOverhead(d))
	}
	if d, ok, err := ms("connections.max.idle.ms", 1); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, kgo.ConnIdleTimeout(d))
	}
	if d, ok, err := ms("metadata.max.age.ms", 1); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, kgo.MetadataMaxAge(d))
	}
	first, okFirst, err := ms("retry.backoff.ms", 0)
	if err != nil {
		return nil, err
	}
	most, okMost, err := ms("retry.backoff.max.ms", 0)
	if err != nil {
		return nil, err
	}
	if okFirst || okMost {
		if !okFirst {
			first = 250 * time.Millisecond // franz-go's, as documented
		}
		if !okMost {
			most = 5 * time.Second // franz-go's, as documented
		}
		if most < first {
			return nil, configErr("retry.backoff.max.ms", "%s is below retry.backoff.ms (%s)", most, first)
		}
		opts = append(opts, kgo.RetryBackoffFn(func(tries int) time.Duration {
			d := first
			for range min(tries-1, 30) {
				if d >= most {
					break
				}
				d *= 2
			}
			return min(d, most)
		}))
	}

	// TLS versions.
	var minTLS, maxTLS uint16
	if v, ok := props["ssl.enabled.protocols"]; ok {
		for _, p := range splitList(v) {
			ver, known := tlsVersions[p]
			if !known {
				return nil, configErr("ssl.enabled.protocols", "%q is not supported (expected a comma-separated list of TLSv1.2 and TLSv1.3)", p)
			}
			if minTLS == 0 || ver < minTLS {
				minTLS = ver
			}
			maxTLS = max(maxTLS, ver)
		}
		if minTLS == 0 {
			return nil, configErr("ssl.enabled.protocols", "is empty (expected TLSv1.2, TLSv1.3 or both)")
		}
	}
	if v, ok := props["ssl.protocol"]; ok {
		// Kafka's ssl.protocol is the SSLContext protocol: the highest
		// version offered when ssl.enabled.protocols does not say.
		ver, known := tlsVersions[strings.TrimSpace(v)]
		if !known && strings.TrimSpace(v) != "TLS" {
			return nil, configErr("ssl.protocol", "%q is not supported (expected TLSv1.2, TLSv1.3 or TLS)", v)
		}
		if known && maxTLS == 0 {
			minTLS, maxTLS = tls.VersionTLS12, ver
		}
	}
	var tlsCfg *tls.Config
	if cc.UsesTLS() {
		var err error
		if tlsCfg, err = cc.TLSConfig(); err != nil {
			return nil, err
		}
		if minTLS != 0 {
			tlsCfg.MinVersion, tlsCfg.MaxVersion = minTLS, maxTLS
			opts = append(opts, kgo.DialTLSConfig(tlsCfg))
		}
	}

	// Socket settings: a dialer of our own when a buffer size is set.
	setup, okSetup, err := ms("socket.connection.setup.timeout.ms", 1)
	if err != nil {
		return nil, err
	}
	rcv, err := buffer("receive.buffer.bytes")
	if err != nil {
		return nil, err
	}
	snd, err := buffer("send.buffer.bytes")
	if err != nil {
		return nil, err
	}
	if rcv < 0 && snd < 0 {
		if okSetup {
			opts = append(opts, kgo.DialTimeout(setup))
		}
		return opts, nil
	}
	nd := &net.Dialer{Timeout: 10 * time.Second}
	if okSetup {
		nd.Timeout = setup
	}
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := nd.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			if rcv > 0 {
				_ = tcp.SetReadBuffer(rcv)
			}
			if snd > 0 {
				_ = tcp.SetWriteBuffer(snd)
			}
		}
		if tlsCfg == nil {
			return conn, nil
		}
		c := tlsCfg.Clone()
		if c.ServerName == "" {
			if h, _, err := net.SplitHostPort(host); err == nil {
				c.ServerName = h
			}
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
	// kgo refuses a Dialer beside DialTLSConfig: the dialer does the TLS.
	return append(opts, kgo.DialTLSConfig(nil), kgo.Dialer(dial)), nil
}
