package sidecar

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSourceConsumerProperties checks that the Kafka consumer properties a
// mirror config accepts become the source client's options.
func TestSourceConsumerProperties(t *testing.T) {
	opts, err := SourceKgoOpts(map[string]string{
		"bootstrap.servers":       "src-1:9092",
		"client.id":               "broker-4-fetcher-0-mirror-my-mirror",
		"request.timeout.ms":      "45000",
		"connections.max.idle.ms": "600000",
		"metadata.max.age.ms":     "60000",
		"retry.backoff.ms":        "200",
		"retry.backoff.max.ms":    "5000",
	})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, c := range []struct {
		opt  any
		want any
	}{
		{kgo.ClientID, "broker-4-fetcher-0-mirror-my-mirror"},
		{kgo.RequestTimeoutOverhead, 45 * time.Second},
		{kgo.ConnIdleTimeout, 10 * time.Minute},
		{kgo.MetadataMaxAge, time.Minute},
	} {
		if got := cl.OptValue(c.opt); got != c.want {
			t.Errorf("option %T = %v, want %v", c.opt, got, c.want)
		}
	}
	backoff := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration)
	if got := []time.Duration{backoff(1), backoff(2), backoff(10)}; got[0] != 200*time.Millisecond || got[1] != 400*time.Millisecond || got[2] != 5*time.Second {
		t.Errorf("retry backoffs %v, want 200ms, 400ms, 5s", got)
	}
}

// TestSourceTLSVersions checks ssl.enabled.protocols and ssl.protocol on a
// TLS source.
func TestSourceTLSVersions(t *testing.T) {
	for _, c := range []struct {
		props    map[string]string
		min, max uint16
	}{
		{map[string]string{"ssl.enabled.protocols": "TLSv1.3"}, tls.VersionTLS13, tls.VersionTLS13},
		{map[string]string{"ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}, tls.VersionTLS12, tls.VersionTLS13},
		{map[string]string{"ssl.protocol": "TLSv1.2"}, tls.VersionTLS12, tls.VersionTLS12},
	} {
		props := map[string]string{"bootstrap.servers": "src-1:9093", "security.protocol": "SSL"}
		for k, v := range c.props {
			props[k] = v
		}
		opts, err := SourceKgoOpts(props)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		cfg := cl.OptValue(kgo.DialTLSConfig).(*tls.Config)
		cl.Close()
		if cfg.MinVersion != c.min || cfg.MaxVersion != c.max {
			t.Errorf("%v: TLS versions %x..%x, want %x..%x", c.props, cfg.MinVersion, cfg.MaxVersion, c.min, c.max)
		}
	}
}

// TestSourceSocketBuffers checks that receive.buffer.bytes and
// send.buffer.bytes size the sockets of the source client's dialer.
func TestSourceSocketBuffers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	opts, err := SourceKgoOpts(map[string]string{"bootstrap.servers": ln.Addr().String(),
		"receive.buffer.bytes": "262144", "send.buffer.bytes": "131072", "socket.connection.setup.timeout.ms": "3000"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dial := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error))
	conn, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var rcv, snd int
	if err := raw.Control(func(fd uintptr) {
		rcv, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		snd, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil {
		t.Fatal(err)
	}
	// Linux reports twice the size set (its bookkeeping), capped by
	// net.core.rmem_max and wmem_max.
	if rcv < 262144 && !capped(t, "rmem_max", rcv) || snd < 131072 && !capped(t, "wmem_max", snd) {
		t.Fatalf("socket buffers: receive %d, send %d; want at least 262144 and 131072", rcv, snd)
	}
}

// capped reports whether got is the kernel's limit net.core.<name>
// (Linux reports twice the size it grants).
func capped(t *testing.T, name string, got int) bool {
	b, err := os.ReadFile("/proc/sys/net/core/" + name)
	if err != nil {
		return false
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Logf("net.core.%s = %d, socket reports %d", name, limit, got)
	return err == nil && got >= limit
}

// TestSourceConsumerPropertyErrors checks that bad values are refused with
// the key named.
func TestSourceConsumerPropertyErrors(t *testing.T) {
	for k, v := range map[string]string{
		"client.id":             " ",
		"request.timeout.ms":    "soon",
		"receive.buffer.bytes":  "0",
		"send.buffer.bytes":     "-2",
		"ssl.enabled.protocols": "TLSv1.1",
		"ssl.protocol":          "SSLv3",
		"retry.backoff.max.ms":  "1",
		"metadata.max.age.ms":   "0",
	} {
		props := map[string]string{"bootstrap.servers": "src-1:9092", k: v}
		if k == "retry.backoff.max.ms" {
			props["retry.backoff.ms"] = "100"
		}
		_, err := SourceKgoOpts(props)
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: error %v, want one naming %s", k, v, err, k)
		}
	}
}

// TestDocsCoverSourceClientKeys keeps docs/configuration.md's consumer
// properties table in step with sourceClientKeys.
func TestDocsCoverSourceClientKeys(t *testing.T) {
	docs, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range sourceClientKeys {
		if !strings.Contains(string(docs), "\n| `"+k+"` |") {
			t.Errorf("docs/configuration.md has no row for the mirror config key %s", k)
		}
	}
}
