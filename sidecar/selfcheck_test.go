package sidecar

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// listenLoopback returns a listener on a free loopback port, closed at
// test end.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestCheckAdvertisedAdmin checks the start-up check of the advertised
// admin address: this sidecar's own listener passes, another process's
// is refused with the line that names the key, and an address nobody
// listens on passes with a warning.
func TestCheckAdvertisedAdmin(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdminListener = ":9191"
	cfg.RaftPeers = []RaftPeer{{ID: 1, Address: "10.0.0.1:9192"}, {ID: 2, Address: "10.0.0.2:9192"}}
	cfg.LocalBrokerID = 1

	t.Run("this sidecar", func(t *testing.T) {
		ln := listenLoopback(t)
		start := time.Now()
		got, err := checkAdvertisedAdmin(cfg, ln, ln.Addr().String(), time.Second, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("the check of this sidecar's own address took %v", d)
		}
		if _, ok := got.(*replayListener); !ok {
			t.Fatalf("returned %T, want the replaying listener", got)
		}
	})

	t.Run("another process", func(t *testing.T) {
		ln, other := listenLoopback(t), listenLoopback(t)
		_, err := checkAdvertisedAdmin(cfg, ln, other.Addr().String(), 300*time.Millisecond, zap.NewNop())
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != KeyAdminAdvertised || !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("err = %v, want a ConfigError of %s", err, KeyAdminAdvertised)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		want := `config: admin.advertised.listener: "` + other.Addr().String() + `" reaches another process, not this sidecar: ` +
			`a connection to it was accepted, but it did not arrive at admin.listener ":9191" within 300ms ` +
			`(set it to an address of this host where admin.listener listens, e.g. 10.0.0.1:` + port + `)`
		if err.Error() != want {
			t.Fatalf("error\n%s\nwant\n%s", err, want)
		}
	})

	t.Run("unreachable from here", func(t *testing.T) {
		ln, gone := listenLoopback(t), listenLoopback(t)
		addr := gone.Addr().String()
		gone.Close()
		core, logs := observer.New(zap.WarnLevel)
		if _, err := checkAdvertisedAdmin(cfg, ln, addr, time.Second, zap.New(core)); err != nil {
			t.Fatalf("an address this host cannot dial was refused: %v", err)
		}
		if logs.Len() != 1 || !strings.Contains(logs.All()[0].Message, "cannot be reached from this host") {
			t.Fatalf("warnings %v, want the one that says the address could not be checked", logs.All())
		}
	})

	t.Run("clients during the check are served", func(t *testing.T) {
		ln := listenLoopback(t)
		// A client connects and sends a request before the check runs: the
		// check accepts it before its own and hands it on.
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		msg := []byte("\x00\x00\x00\x05hello, a request longer than the check's nonce and magic")
		if _, err := client.Write(msg); err != nil {
			t.Fatal(err)
		}
		got, err := checkAdvertisedAdmin(cfg, ln, ln.Addr().String(), time.Second, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		c, err := got.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, len(msg))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != string(msg) {
			t.Fatalf("the client's connection read %q, %v; want %q", buf, err, msg)
		}
	})
}
