package raftnode

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// contactTimeout is how long a follower may go without hearing from a
// leader before it stops answering reads from its own state.
const contactTimeout = 5 * time.Second

// WaitCaughtUp blocks until this node's state machine holds every command
// committed before the call, or ctx ends. A sidecar that just started
// rebuilds its state from its snapshot and log: until it has applied what
// the leader committed, its state may lack mirrors that exist or show a
// topic as mirroring that was stopped meanwhile. So admin requests and the
// reconcile loop wait for this first.
//
// Once per raft term the node proves it has caught up: the leader with a
// raft barrier, a follower by sending a ReadBarrier command to the leader
// and waiting until its own FSM applied it. Within that term a follower
// then only needs recent contact with the leader.
func (n *Node) WaitCaughtUp(ctx context.Context) error {
	for {
		term := n.raft.CurrentTerm()
		switch n.raft.State() {
		case raft.Leader:
			if n.caughtUpTerm.Load() == term {
				return nil
			}
			d := time.Second
			if dl, ok := ctx.Deadline(); ok {
				d = time.Until(dl)
			}
			if err := n.raft.Barrier(d).Error(); err == nil {
				n.caughtUpTerm.Store(term)
				return nil
			}
		case raft.Follower:
			last := n.raft.LastContact()
			if last.IsZero() || time.Since(last) >= contactTimeout {
				break
			}
			if n.caughtUpTerm.Load() == term {
				return nil
			}
			if n.readBarrier(ctx) {
				n.caughtUpTerm.Store(term)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("coordinator: this sidecar has not caught up with the raft group: %w (is a majority of sidecars running?)", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readBarrier applies a ReadBarrier through the leader and reports whether
// this node's FSM has applied it.
func (n *Node) readBarrier(ctx context.Context) bool {
	bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := n.ApplyCommand(bctx, fsm.ReadBarrier{})
	return err == nil && res.Index > 0 && n.fsm.Index() >= res.Index
}
