package raftnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/protocol"
)

// Forwarder sends an encoded command to the leader's admin endpoint, whose
// handler calls Node.ApplyLocal there, and returns that Result.
//
// Forward must return an error matching ErrNotLeader when the remote
// answered that it is not the leader, and one matching ErrNotDelivered when
// the command certainly did not reach the remote (e.g. the connection could
// not be opened): Node.Apply retries both. Any other error reaches Apply's
// caller, because the command may have been applied. Forward should carry
// Result.Index back, so that the follower can wait to read its own write.
type Forwarder interface {
	Forward(ctx context.Context, leaderAdminAddr string, command []byte) (fsm.Result, error)
}

// Peers is the client of the other sidecars' internal APIs on their admin
// endpoints: it forwards raft commands to the leader (Forwarder) and
// carries the coordinator's requests to peers (partition states,
// DescribeLocalPartitions, probes). It keeps one connection per address and
// redials after an error.
type Peers struct {
	opts []protocol.ClientOpt

	mu    sync.Mutex
	conns map[string]*protocol.Client
}

// NewPeers returns an empty connection pool whose connections are dialled
// with opts after the client ID: the place where the peers' TLS settings
// (protocol.DialTLSConfig) plug in.
func NewPeers(opts ...protocol.ClientOpt) *Peers {
	return &Peers{opts: append([]protocol.ClientOpt{protocol.ClientID("sidemirror-sidecar")}, opts...), conns: map[string]*protocol.Client{}}
}

// Do sends req to the sidecar at addr. A transport error closes that
// connection so the next call redials. A pooled connection that another
// call found broken (its request still waiting for the connection) did
// not send req: Do then sends it once more on a fresh connection, so that
// a request queued behind a timed-out one is not reported as failed, nor,
// by Forward, as a command that may have been applied.
func (p *Peers) Do(ctx context.Context, addr string, req protocol.Request) (protocol.Response, error) {
	for attempt := 0; ; attempt++ {
		c, err := p.conn(ctx, addr)
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(ctx, req)
		if err == nil {
			return resp, nil
		}
		p.mu.Lock()
		if p.conns[addr] == c {
			delete(p.conns, addr)
		}
		p.mu.Unlock()
		c.Close()
		if !errors.Is(err, protocol.ErrClientClosed) || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
	}
}

// conn returns the pooled connection to addr, dialling one if there is
// none.
func (p *Peers) conn(ctx context.Context, addr string) (*protocol.Client, error) {
	p.mu.Lock()
	c := p.conns[addr]
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := protocol.Dial(ctx, addr, p.opts...)
	if err != nil {
		return nil, &dialError{addr: addr, err: err}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.conns[addr]; old != nil {
		c.Close()
		return old, nil
	}
	p.conns[addr] = c
	return c, nil
}

// Forward implements Forwarder with the ApplyCommand API.
func (p *Peers) Forward(ctx context.Context, leaderAdminAddr string, command []byte) (fsm.Result, error) {
	resp, err := p.Do(ctx, leaderAdminAddr, &protocol.ApplyCommandRequest{Command: command})
	if err != nil {
		var de *dialError
		if errors.As(err, &de) || errors.Is(err, protocol.ErrClientClosed) {
			return fsm.Result{}, fmt.Errorf("%w: %v", ErrNotDelivered, err)
		}
		return fsm.Result{}, fmt.Errorf("coordinator: forward to raft leader at %s: %w", leaderAdminAddr, err)
	}
	r := resp.(*protocol.ApplyCommandResponse)
	if r.ErrorCode == kerr.NotController.Code {
		return fsm.Result{}, fmt.Errorf("%w: %s answered: %s", ErrNotLeader, leaderAdminAddr, deref(r.ErrorMessage))
	}
	if r.ErrorCode != 0 {
		return fsm.Result{}, fmt.Errorf("coordinator: raft leader at %s: %w", leaderAdminAddr, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}
	var res fsm.Result
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return fsm.Result{}, fmt.Errorf("coordinator: bad result from raft leader at %s: %w", leaderAdminAddr, err)
	}
	return res, nil
}

// dialError is a failure to connect: the request was certainly not sent.
type dialError struct {
	addr string
	err  error
}

func (e *dialError) Error() string { return fmt.Sprintf("connect to %s: %v", e.addr, e.err) }
func (e *dialError) Unwrap() error { return e.err }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Close closes every connection.
func (p *Peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		c.Close()
		delete(p.conns, addr)
	}
}
