package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// Apply applies an encoded command through raft and returns the FSM's
// Result. On the leader it appends to the raft log; on a follower it
// forwards the command to the leader's admin endpoint and then waits (until
// ctx ends at most) for its own FSM to reach the command, so that the
// caller reads its own write. When no leader is known, or the leader
// changes under the call, it retries until ctx ends. Result carries the
// command's own errors; the error is for failures to get it applied.
func (n *Node) Apply(ctx context.Context, cmd []byte) (fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, err
	}
	backoff := 10 * time.Millisecond
	var lastErr error
	for {
		if n.closing.Load() {
			return fsm.Result{}, ErrClosed
		}
		var (
			res fsm.Result
			err error
		)
		if n.raft.State() == raft.Leader {
			res, err = n.applyRaft(ctx, cmd)
			if err == nil {
				return res, nil
			}
		} else if id, addr := n.Leader(); addr != "" && id != n.cfg.ID {
			if n.cfg.Forwarder == nil {
				return fsm.Result{}, fmt.Errorf("coordinator: this sidecar is a follower and has no Forwarder to reach the leader (broker %d at %s)", id, addr)
			}
			res, err = n.cfg.Forwarder.Forward(ctx, addr, cmd)
			if err == nil {
				n.waitApplied(ctx, res.Index)
				return res, nil
			}
			err = fmt.Errorf("coordinator: forwarding %s to the raft leader (broker %d at %s): %w", commandName(cmd), id, addr, err)
		}
		if err != nil {
			if !retryable(err) {
				return fsm.Result{}, err
			}
			lastErr = err
		}
		if !sleepCtx(ctx, backoff) {
			if lastErr != nil {
				return fsm.Result{}, fmt.Errorf("%w (%w)", lastErr, ctx.Err())
			}
			return fsm.Result{}, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// ApplyCommand encodes c and applies it with Apply.
func (n *Node) ApplyCommand(ctx context.Context, c fsm.Command) (fsm.Result, error) {
	b, err := fsm.EncodeCommand(c)
	if err != nil {
		return fsm.Result{}, err
	}
	return n.Apply(ctx, b)
}

// ResultErr returns nil for a result without a top-level error, else the
// kerr error of its code wrapped with the message, so that
// errors.Is(err, kerr.InvalidRequest) and the like work.
func ResultErr(r fsm.Result) error {
	if r.ErrorCode == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
}

// ApplyLocal applies an encoded command if this node is the leader, and
// otherwise returns a *NotLeaderError (matching ErrNotLeader) naming the
// leader's admin address if known. The admin endpoint calls it for
// commands forwarded by followers.
func (n *Node) ApplyLocal(ctx context.Context, cmd []byte) (fsm.Result, error) {
	if n.closing.Load() {
		return fsm.Result{}, &NotLeaderError{LeaderID: -1, Closing: true}
	}
	if n.raft.State() == raft.Leader {
		res, err := n.applyRaft(ctx, cmd)
		if errors.Is(err, ErrClosed) {
			return fsm.Result{}, &NotLeaderError{LeaderID: -1, Closing: true}
		}
		if err == nil || !retryable(err) {
			return res, err
		}
	}
	id, addr := n.Leader()
	if id == n.cfg.ID { // stepping down or just elected: no better answer yet
		id, addr = -1, ""
	}
	return fsm.Result{}, &NotLeaderError{LeaderID: id, LeaderAdminAddr: addr}
}

// applyRaft appends cmd to the raft log as the leader and waits for the
// FSM's Result. raft bounds the wait: a leader that loses its quorum steps
// down within LeaderLeaseTimeout and fails the pending commands.
func (n *Node) applyRaft(ctx context.Context, cmd []byte) (fsm.Result, error) {
	if !n.beginApply() {
		return fsm.Result{}, ErrClosed
	}
	defer n.endApply()
	var timeout time.Duration // 0 = no enqueue timeout
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return fsm.Result{}, ctx.Err()
		}
	}
	f := n.raft.Apply(cmd, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrRaftShutdown):
			return fsm.Result{}, ErrClosed
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return fsm.Result{}, fmt.Errorf("coordinator: applying %s: %w (%w)", commandName(cmd), err, context.DeadlineExceeded)
		case errors.Is(err, raft.ErrLeadershipLost):
			return n.resolveLost(ctx, f.Index(), cmd)
		}
		return fsm.Result{}, fmt.Errorf("coordinator: applying %s: %w", commandName(cmd), err)
	}
	res, ok := f.Response().(fsm.Result)
	if !ok {
		return fsm.Result{}, fmt.Errorf("coordinator: BUG: the FSM answered %T instead of a Result", f.Response())
	}
	return res, nil
}

// resolveLost finds out what became of a command this node appended as
// leader and lost leadership before it committed (raft.ErrLeadershipLost):
// the new leader either kept the entry, and it gets applied, or replaced
// it. resolveLost waits until this node applied up to the entry's index,
// then compares the entry there with the command: the same command gives
// its FSM Result; another entry means the command was dropped and returns
// an error matching ErrNotLeader, so that it is sent again. It returns an
// error when it cannot tell before ctx ends or the node closes.
func (n *Node) resolveLost(ctx context.Context, index uint64, cmd []byte) (fsm.Result, error) {
	name := commandName(cmd)
	unknown := func(why error) (fsm.Result, error) {
		return fsm.Result{}, fmt.Errorf("coordinator: applying %s: %w, and whether it was applied is unknown (%w); check the state before retrying",
			name, raft.ErrLeadershipLost, why)
	}
	if index == 0 {
		return unknown(errors.New("no log index"))
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n.raft.AppliedIndex() < index {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return unknown(ctx.Err())
		case <-n.bgCtx.Done():
			return unknown(ErrClosed)
		}
	}
	var entry raft.Log
	if err := n.store.GetLog(index, &entry); err != nil {
		return unknown(err)
	}
	if entry.Type != raft.LogCommand || !bytes.Equal(entry.Data, cmd) {
		return fsm.Result{}, fmt.Errorf("coordinator: %s was dropped when raft leadership moved: %w", name, ErrNotLeader)
	}
	for {
		ch := n.fsm.Watch()
		if res, ok := n.fsm.ResultAt(index); ok {
			n.log.Debug("command committed although leadership was lost", zap.String("command", name), zap.Uint64("index", index))
			return res, nil
		}
		if n.fsm.Index() >= index {
			return fsm.Result{}, fmt.Errorf("coordinator: %s was applied at index %d after raft leadership moved, but its result is no longer known; check the state",
				name, index)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return unknown(ctx.Err())
		case <-n.bgCtx.Done():
			return unknown(ErrClosed)
		}
	}
}

// beginApply counts a raft apply in, unless Close began.
func (n *Node) beginApply() bool {
	n.appliesMu.Lock()
	defer n.appliesMu.Unlock()
	if n.closing.Load() {
		return false
	}
	n.applies++
	return true
}

func (n *Node) endApply() {
	n.appliesMu.Lock()
	defer n.appliesMu.Unlock()
	n.applies--
	if n.applies == 0 && n.closing.Load() {
		close(n.appliesIdle)
	}
}

// retryable reports whether err means the command was certainly not
// applied, so that Apply may send it again.
func retryable(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNotDelivered) ||
		errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

func commandName(cmd []byte) string {
	if len(cmd) == 0 {
		return "an empty command"
	}
	return fsm.CommandType(cmd[0]).String()
}

// waitApplied waits until the FSM applied index, ctx ends or the node
// closes. Index 0 (a Forwarder that does not carry it) returns at once.
func (n *Node) waitApplied(ctx context.Context, index uint64) {
	for {
		ch := n.fsm.Watch()
		if n.fsm.Index() >= index {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-n.stopCh:
			return
		}
	}
}
