package sidecar

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// notifySocket listens on a unixgram socket and points $NOTIFY_SOCKET at
// it, as systemd does for a Type=notify service; its channel gets every
// datagram.
func notifySocket(t *testing.T, name string) <-chan string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(notifySocketEnv, name)
	got := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return got
}

// shortTempDir returns a directory for a socket (paths of Unix sockets
// are limited to 107 bytes; t.TempDir's can be longer).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// nextNotification returns the next datagram, failing after 30 s.
func nextNotification(t *testing.T, got <-chan string, waitingFor string) string {
	t.Helper()
	select {
	case s := <-got:
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("no notification within 30 s while waiting for %s", waitingFor)
		return ""
	}
}

func TestSdNotify(t *testing.T) {
	t.Run("no NOTIFY_SOCKET", func(t *testing.T) {
		t.Setenv(notifySocketEnv, "")
		if sent, err := sdNotify("READY=1"); sent || err != nil {
			t.Fatalf("sdNotify = %v, %v; want false, nil outside systemd", sent, err)
		}
	})
	for _, tc := range []struct{ name, path string }{
		{"path", filepath.Join(shortTempDir(t), "notify")},
		{"abstract", "@sidemirror-test-" + strings.ReplaceAll(t.Name(), "/", "-")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := notifySocket(t, tc.path)
			if sent, err := sdNotify("READY=1\nSTATUS=ok"); !sent || err != nil {
				t.Fatalf("sdNotify = %v, %v", sent, err)
			}
			if s := nextNotification(t, got, "READY=1"); s != "READY=1\nSTATUS=ok" {
				t.Fatalf("datagram %q, want %q", s, "READY=1\nSTATUS=ok")
			}
		})
	}
	t.Run("socket gone", func(t *testing.T) {
		path := filepath.Join(shortTempDir(t), "absent")
		t.Setenv(notifySocketEnv, path)
		if _, err := sdNotify("READY=1"); err == nil || !strings.Contains(err.Error(), notifySocketEnv) || !strings.Contains(err.Error(), path) {
			t.Fatalf("sdNotify to a missing socket = %v; want an error naming %s and the path", err, notifySocketEnv)
		}
	})
}

// notifyConfig is a sidecar whose destination is a kfake cluster of
// brokers 0 and 1, next to broker id, alone in its raft group.
func notifyConfig(t *testing.T, id int32) Config {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := testConfig(t, t.TempDir())
	cfg.LocalBrokerID = id
	cfg.LocalBootstrapServers = c.ListenAddrs()
	cfg.Destination.BootstrapServers = c.ListenAddrs()
	cfg.AdminListener, cfg.RaftListener = freeAddr(t), freeAddr(t)
	return cfg
}

// TestSidecarNotifiesSystemd runs a sidecar under a Type=notify socket: it
// sends READY=1 once it leads its one-member raft group and reaches broker
// 1, and STOPPING=1 when it shuts down.
func TestSidecarNotifiesSystemd(t *testing.T) {
	got := notifySocket(t, filepath.Join(shortTempDir(t), "notify"))
	r := startSidecar(t, notifyConfig(t, 1))
	r.waitReady(t)
	for {
		s := nextNotification(t, got, "READY=1")
		if strings.HasPrefix(s, "READY=1\n") {
			break
		}
		if !strings.HasPrefix(s, "STATUS=waiting: ") {
			t.Fatalf("notification %q before READY=1; want only STATUS=waiting: ...", s)
		}
	}
	r.stop()
	if s := nextNotification(t, got, "STOPPING=1"); s != "STOPPING=1" {
		t.Fatalf("notification %q after the stop, want STOPPING=1", s)
	}
}

// TestSidecarNotReadyWithoutItsBroker runs a sidecar next to broker 7,
// which the destination cluster does not have: systemd hears what it waits
// for and never READY=1, then STOPPING=1.
func TestSidecarNotReadyWithoutItsBroker(t *testing.T) {
	got := notifySocket(t, filepath.Join(shortTempDir(t), "notify"))
	r := startSidecar(t, notifyConfig(t, 7))
	r.waitReady(t)
	for {
		s := nextNotification(t, got, "the status naming broker 7")
		if !strings.HasPrefix(s, "STATUS=waiting: ") {
			t.Fatalf("notification %q; want only STATUS=waiting: ... while broker 7 is missing", s)
		}
		if strings.Contains(s, "broker 7 (local.broker.id) in the destination cluster's metadata") {
			break
		}
	}
	r.stop()
	if s := nextNotification(t, got, "STOPPING=1"); s != "STOPPING=1" {
		t.Fatalf("notification %q after the stop, want STOPPING=1", s)
	}
}
