package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/protocol"
)

// Peers talks to other sidecars' admin endpoints: it forwards raft commands
// to the leader (Forwarder) and asks peers for the partitions they drive. It
// keeps one connection per address and redials after an error.
type Peers struct {
	mu    sync.Mutex
	conns map[string]*protocol.Client
}

// NewPeers returns an empty connection pool.
func NewPeers() *Peers { return &Peers{conns: map[string]*protocol.Client{}} }

// Do sends req to the sidecar at addr. A transport error closes that
// connection so the next call redials.
func (p *Peers) Do(ctx context.Context, addr string, req protocol.Request) (protocol.Response, error) {
	p.mu.Lock()
	c := p.conns[addr]
	p.mu.Unlock()
	if c == nil {
		var err error
		c, err = protocol.Dial(ctx, addr, protocol.ClientID("sidemirror-sidecar"))
		if err != nil {
			return nil, &dialError{addr: addr, err: err}
		}
		p.mu.Lock()
		if old := p.conns[addr]; old != nil {
			c.Close()
			c = old
		} else {
			p.conns[addr] = c
		}
		p.mu.Unlock()
	}
	resp, err := c.Do(ctx, req)
	if err != nil {
		p.mu.Lock()
		if p.conns[addr] == c {
			delete(p.conns, addr)
		}
		p.mu.Unlock()
		c.Close()
	}
	return resp, err
}

// Forward implements Forwarder with the ApplyCommand API.
func (p *Peers) Forward(ctx context.Context, leaderAdminAddr string, command []byte) (Result, error) {
	resp, err := p.Do(ctx, leaderAdminAddr, &protocol.ApplyCommandRequest{Command: command})
	if err != nil {
		var de *dialError
		if errors.As(err, &de) {
			return Result{}, fmt.Errorf("%w: %v", ErrNotDelivered, err)
		}
		return Result{}, fmt.Errorf("coordinator: forward to raft leader at %s: %w", leaderAdminAddr, err)
	}
	r := resp.(*protocol.ApplyCommandResponse)
	if r.ErrorCode == kerr.NotController.Code {
		return Result{}, fmt.Errorf("%w: %s answered: %s", ErrNotLeader, leaderAdminAddr, deref(r.ErrorMessage))
	}
	if r.ErrorCode != 0 {
		return Result{}, fmt.Errorf("coordinator: raft leader at %s: %w", leaderAdminAddr, protocol.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}
	var res Result
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return Result{}, fmt.Errorf("coordinator: bad result from raft leader at %s: %w", leaderAdminAddr, err)
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
