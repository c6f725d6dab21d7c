package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// WaitCaughtUp blocks until this node's state machine holds every command
// committed before the call, or ctx ends. A sidecar that just started
// rebuilds its state from raft: until a leader has told it the commit index
// and it has applied up to it, its state may lack mirrors that exist, so
// admin requests wait for this first. On the leader it is a raft barrier.
func (n *Node) WaitCaughtUp(ctx context.Context) error {
	for {
		if n.IsLeader() {
			d := time.Second
			if dl, ok := ctx.Deadline(); ok {
				d = time.Until(dl)
			}
			if err := n.raft.Barrier(d).Error(); err == nil {
				return nil
			}
		} else if n.raft.State() == raft.Follower {
			last := n.raft.LastContact()
			commit := n.raft.CommitIndex()
			if !last.IsZero() && time.Since(last) < 5*time.Second && commit > 0 && n.raft.AppliedIndex() >= commit {
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
