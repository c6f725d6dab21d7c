package raftnode_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/protocol"
)

// stallFirst answers ApplyCommand with an empty result, but holds the first
// request until release is closed, as a leader that stopped answering for a
// while (SIGSTOP, a long pause) does.
type stallFirst struct {
	mu       sync.Mutex
	calls    int
	received chan struct{}
	release  chan struct{}
}

func (h *stallFirst) Handle(ctx context.Context, _ *protocol.ConnInfo, req protocol.Request) protocol.Response {
	h.mu.Lock()
	h.calls++
	first := h.calls == 1
	h.mu.Unlock()
	if first {
		close(h.received)
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	result, _ := json.Marshal(fsm.Result{Index: 7})
	resp := req.ResponseKind().(*protocol.ApplyCommandResponse)
	resp.Result = result
	return resp
}

// TestForwardQueuedBehindATimeout: a command forwarded while another waits
// on the same pooled connection, whose request then times out, was never
// sent. Forward sends it on a fresh connection rather than reporting a
// command that may have been applied (which Apply does not retry).
func TestForwardQueuedBehindATimeout(t *testing.T) {
	h := &stallFirst{received: make(chan struct{}), release: make(chan struct{})}
	defer close(h.release)
	srv := protocol.NewServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	addr := l.Addr().String()

	p := raftnode.NewPeers()
	defer p.Close()
	firstErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := p.Forward(ctx, addr, []byte("first"))
		firstErr <- err
	}()
	<-h.received // the first request holds the pooled connection

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Forward(ctx, addr, []byte("second"))
	if err != nil {
		t.Fatalf("the command queued behind the timed-out one: %v", err)
	}
	if res.Index != 7 {
		t.Fatalf("result %+v, want index 7", res)
	}
	if err := <-firstErr; err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the stalled command: %v, want its deadline", err)
	}
}
