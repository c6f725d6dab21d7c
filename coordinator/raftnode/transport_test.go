package raftnode

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// TestTCPStreamBounds: the plaintext raft listener closes connections
// beyond its limit (logged), frees a slot when a connection closes, and a
// connection that sends nothing for the idle timeout fails its read.
func TestTCPStreamBounds(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s, err := listenTCP("127.0.0.1:0", "127.0.0.1:1", 2, 300*time.Millisecond, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	addr := s.ln.Addr().String()
	t.Cleanup(func() { _ = s.Close() })
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	a := <-accepted
	<-accepted
	third := dial()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the third connection was not closed: %v", err)
	}
	testwait.For(t, 5*time.Second, "the refusal log", func() bool {
		return logs.FilterMessageSnippet("raft.max.connections").Len() > 0
	})
	// An idle connection's read times out; closing it frees its slot.
	start := time.Now()
	var ne net.Error
	if _, err := a.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("an idle read: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the idle read took %v", d)
	}
	_ = a.Close()
	_ = a.Close() // closing twice frees one slot only
	dial()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted after a slot was freed")
	}
	if n := s.open.Load(); n != 2 {
		t.Errorf("%d connections counted open, want 2", n)
	}
}
