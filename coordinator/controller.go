package coordinator

import (
	"context"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
)

// controller is what the parts need of the raft group: a copy of the
// replicated state, a way to change it, and whether this sidecar leads the
// group (only the leader runs the metadata sync, discovery and failover).
type controller interface {
	State() *fsm.State
	Apply(ctx context.Context, c fsm.Command) (fsm.Result, error)
	IsLeader() bool
}

// raftController is the controller of a raft node.
type raftController struct{ node *raftnode.Node }

var _ controller = raftController{}

// State returns a copy of the controller state.
func (c raftController) State() *fsm.State {
	var st *fsm.State
	c.node.FSM().Read(func(cur *fsm.State) { st = cur.Clone() })
	return st
}

// Apply proposes c through raft (forwarded when not leader) and returns its
// Result; the error is for failures to get it applied.
func (c raftController) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	return c.node.ApplyCommand(ctx, cmd)
}

// IsLeader reports whether this sidecar leads the raft group.
func (c raftController) IsLeader() bool { return c.node.IsLeader() }

// Changed returns a channel closed at the next change of the state.
func (c raftController) Changed() <-chan struct{} { return c.node.FSM().Watch() }

// WaitCaughtUp waits until the state holds every command committed before
// the call (raftnode.Node.WaitCaughtUp).
func (c raftController) WaitCaughtUp(ctx context.Context) error { return c.node.WaitCaughtUp(ctx) }

// AdminAddr returns the admin endpoint a broker's sidecar registered, or "".
func (c raftController) AdminAddr(broker int32) string {
	var addr string
	c.node.FSM().Read(func(st *fsm.State) {
		if sc, ok := st.Sidecars[broker]; ok {
			addr = sc.AdminAddr
		}
	})
	return addr
}

// applyChecked is the one way to apply a command and check its result: the
// error is that of getting it applied, or else the command's own
// top-level error (raftnode.ResultErr, a kerr error). Per-topic results
// are the caller's to read.
func applyChecked(ctx context.Context, ctl controller, c fsm.Command) (fsm.Result, error) {
	res, err := ctl.Apply(ctx, c)
	if err != nil {
		return res, err
	}
	return res, raftnode.ResultErr(res)
}
