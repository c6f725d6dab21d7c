package testbed

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// loopbackEcho serves TCP echo on a free loopback port for the test.
func loopbackEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// dialProxy connects to p, closed at test end.
func dialProxy(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestProxy checks the proxy's forwarding, byte counts, latency, blackhole
// and cut against an echo server.
func TestProxy(t *testing.T) {
	p, err := NewProxy("127.0.0.1:0", loopbackEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)

	t.Run("forward and count", func(t *testing.T) {
		before := p.Traffic()
		c := dialProxy(t, p)
		msg := bytes.Repeat([]byte("0123456789"), 100_000)
		if err := echoes(c, msg, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if d := p.Traffic().Sub(before); d.ToUpstream != int64(len(msg)) || d.ToClients != int64(len(msg)) {
			t.Fatalf("traffic %+v for a %d-byte echo", d, len(msg))
		}
		if n := p.Connections(); n != 1 {
			t.Fatalf("%d connections open, want 1", n)
		}
	})

	t.Run("latency", func(t *testing.T) {
		const lat = 100 * time.Millisecond
		p.SetLatency(lat)
		defer p.SetLatency(0)
		c := dialProxy(t, p)
		start := time.Now()
		if err := echoes(c, []byte("x"), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(start); rtt < 2*lat {
			t.Fatalf("round trip %v through a proxy adding %v each way", rtt, lat)
		}
		// Twenty messages sent back to back arrive one latency apart from
		// their sending, not one after another's round trip.
		start = time.Now()
		for range 20 {
			if _, err := c.Write([]byte("y")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 20)); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 10*lat {
			t.Fatalf("20 pipelined messages took %v: the latency serialises them", d)
		}
	})

	t.Run("blackhole", func(t *testing.T) {
		c := dialProxy(t, p)
		p.Blackhole()
		defer p.Restore()
		if _, err := c.Write([]byte("held\n")); err != nil {
			t.Fatal(err)
		}
		late := dialProxy(t, p) // accepted, but nothing answers
		if _, err := late.Write([]byte("late\n")); err != nil {
			t.Fatal(err)
		}
		for _, conn := range []net.Conn{c, late} {
			_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if n, err := conn.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read %d bytes, %v through a blackhole; want a timeout", n, err)
			}
		}
		p.Restore()
		for conn, want := range map[net.Conn]string{c: "held\n", late: "late\n"} {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			got := make([]byte, len(want))
			if _, err := io.ReadFull(conn, got); err != nil || string(got) != want {
				t.Fatalf("after Restore read %q, %v; want %q", got, err, want)
			}
		}
	})

	t.Run("cut", func(t *testing.T) {
		c := dialProxy(t, p)
		if err := echoes(c, []byte("before\n"), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		p.Cut()
		defer p.Restore()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 16)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("an open connection read %v after Cut; want it closed", err)
		}
		fresh := dialProxy(t, p)
		_ = fresh.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := fresh.Read(make([]byte, 16)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a new connection read %v during Cut; want it closed", err)
		}
		p.Restore()
		if err := echoes(dialProxy(t, p), []byte("after\n"), 5*time.Second); err != nil {
			t.Fatalf("after Restore: %v", err)
		}
	})

	t.Run("close", func(t *testing.T) {
		q, err := NewProxy("127.0.0.1:0", p.Upstream())
		if err != nil {
			t.Fatal(err)
		}
		c := dialProxy(t, q)
		if err := echoes(c, []byte("x"), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		q.Blackhole()
		q.Close() // returns only when every goroutine of q has ended
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read %v after Close; want the connection closed", err)
		}
		if _, err := net.DialTimeout("tcp", q.Addr(), time.Second); err == nil {
			t.Fatal("a closed proxy accepts connections")
		}
	})
}

// TestLoopbackProxiedNodes: a loopback cluster (no hosts) with Proxied gives
// every node a proxy on a loopback port of its own that forwards to the
// node's REMOTE listener, which advertises the proxy; CloseProxies closes
// them.
func TestLoopbackProxiedNodes(t *testing.T) {
	c := &Cluster{opts: ClusterOptions{Name: "src", Nodes: 2, Proxied: true}, dir: t.TempDir()}
	if err := c.placeNodes(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range c.Nodes() {
		p := n.Proxy()
		if p == nil {
			t.Fatalf("node %d has no proxy", n.ID)
		}
		if n.RemoteAddr != p.Addr() || n.RemoteAddr == n.BrokerAddr {
			t.Errorf("node %d: remote %s, proxy %s, broker %s", n.ID, n.RemoteAddr, p.Addr(), n.BrokerAddr)
		}
		for _, a := range []string{n.BrokerAddr, n.ControllerAddr, p.Upstream(), p.Addr()} {
			if seen[a] {
				t.Errorf("node %d: address %s used twice", n.ID, a)
			}
			seen[a] = true
		}
		n.dir = filepath.Join(c.dir, "node")
		if err := n.writeConfig(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(n.configPath())
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"REMOTE://" + p.Upstream(), "REMOTE://" + p.Addr(), "REMOTE:PLAINTEXT"} {
			if !bytes.Contains(data, []byte(want)) {
				t.Errorf("node %d's config has no %s:\n%s", n.ID, want, data)
			}
		}
	}
	if got := c.RemoteBootstrap(); got == c.Bootstrap() {
		t.Errorf("remote bootstrap %s is the direct one", got)
	}
	addr := c.Nodes()[0].Proxy().Addr()
	c.CloseProxies()
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("the proxy at %s still accepts after CloseProxies", addr)
	}
}
