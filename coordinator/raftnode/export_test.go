package raftnode

import (
	"context"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// Internals the external tests (package raftnode_test) look at.

// Bootstrapped reports whether this open bootstrapped the group.
func (n *Node) Bootstrapped() bool { return n.bootstrapped }

// Snapshot has raft take a snapshot now.
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// ResolveLost is resolveLost.
func (n *Node) ResolveLost(ctx context.Context, index uint64, cmd []byte) (fsm.Result, error) {
	return n.resolveLost(ctx, index, cmd)
}

// Term is raft's current term as this node sees it.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }
