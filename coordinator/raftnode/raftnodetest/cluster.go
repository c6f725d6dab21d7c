// Package raftnodetest runs raft nodes in one process for tests: on raft's
// in-memory transport, with boltdb stores in temporary directories, the
// cluster itself forwarding commands between them as the admin endpoints
// do in production.
package raftnodetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

// Timeout bounds every wait of the cluster.
const Timeout = 20 * time.Second

// Cluster runs raft nodes on raft's in-memory transport, with boltdb
// stores in temporary directories, and is their Forwarder: it calls the
// ApplyLocal of the node registered under the admin address, as the admin
// endpoint does.
type Cluster struct {
	t        *testing.T
	peers    []raftnode.Peer
	dirs     map[int32]string
	forwards atomic.Int64

	mu    sync.Mutex
	nodes map[int32]*raftnode.Node
	trans map[int32]*raft.InmemTransport
}

// RaftAddr is the in-memory raft address of node id.
func RaftAddr(id int32) string { return fmt.Sprintf("raft-%d", id) }

// AdminAddr is the admin address node id registers.
func AdminAddr(id int32) string { return fmt.Sprintf("admin-%d", id) }

// New returns a cluster of the given node IDs, none started; the test's
// cleanup stops them.
func New(t *testing.T, ids ...int32) *Cluster {
	t.Helper()
	c := &Cluster{t: t, dirs: map[int32]string{}, nodes: map[int32]*raftnode.Node{}, trans: map[int32]*raft.InmemTransport{}}
	for _, id := range ids {
		c.peers = append(c.peers, raftnode.Peer{ID: id, Address: RaftAddr(id)})
		c.dirs[id] = t.TempDir()
	}
	t.Cleanup(func() {
		for _, id := range ids {
			c.Stop(id)
		}
	})
	return c
}

// Forward implements raftnode.Forwarder.
func (c *Cluster) Forward(ctx context.Context, addr string, cmd []byte) (fsm.Result, error) {
	c.forwards.Add(1)
	c.mu.Lock()
	var target *raftnode.Node
	for id, n := range c.nodes {
		if AdminAddr(id) == addr {
			target = n
		}
	}
	c.mu.Unlock()
	if target == nil {
		return fsm.Result{}, fmt.Errorf("dial %s: connection refused: %w", addr, raftnode.ErrNotDelivered)
	}
	return target.ApplyLocal(ctx, cmd)
}

// Config is the configuration Start opens node id with, on trans, with
// short raft timeouts.
func (c *Cluster) Config(id int32, trans raft.Transport) raftnode.NodeConfig {
	return raftnode.NodeConfig{
		ID:                 id,
		DataDir:            c.dirs[id],
		Peers:              c.peers,
		AdminAddr:          AdminAddr(id),
		Version:            "test",
		Logger:             zaptest.NewLogger(c.t),
		Forwarder:          c,
		Transport:          trans,
		HeartbeatTimeout:   200 * time.Millisecond,
		ElectionTimeout:    200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// Connect returns a fresh in-memory transport for node id, connected both
// ways to every other transport; the others drop their routes (and
// pipelines) to the node's previous transport first, as TCP connections to
// a restarted process break.
func (c *Cluster) Connect(id int32) *raft.InmemTransport {
	_, tr := raft.NewInmemTransport(raft.ServerAddress(RaftAddr(id)))
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, ot := range c.trans {
		if other != id {
			ot.Disconnect(tr.LocalAddr())
			tr.Connect(ot.LocalAddr(), ot)
			ot.Connect(tr.LocalAddr(), tr)
		}
	}
	c.trans[id] = tr
	return tr
}

// Add registers a node opened elsewhere (with Config and a transport from
// Connect), so that Forward, Running and Stop know it.
func (c *Cluster) Add(id int32, n *raftnode.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[id] = n
}

// Forwards counts the commands forwarded so far.
func (c *Cluster) Forwards() int64 { return c.forwards.Load() }

// Start opens node id on a transport from Connect.
func (c *Cluster) Start(id int32) *raftnode.Node {
	c.t.Helper()
	tr := c.Connect(id)
	n, err := raftnode.OpenNode(c.Config(id, tr))
	if err != nil {
		c.t.Fatalf("OpenNode(%d): %v", id, err)
	}
	c.Add(id, n)
	return n
}

// Stop closes node id, if running, and makes the others' RPCs to it fail
// at once, as with a closed TCP port.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n == nil {
		return
	}
	if err := n.Close(); err != nil {
		c.t.Errorf("Close(%d): %v", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, ot := range c.trans {
		if other != id {
			ot.Disconnect(raft.ServerAddress(RaftAddr(id)))
		}
	}
}

// Running returns the running nodes by ID.
func (c *Cluster) Running() map[int32]*raftnode.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[int32]*raftnode.Node, len(c.nodes))
	for id, n := range c.nodes {
		m[id] = n
	}
	return m
}

// WaitStable waits until exactly one running node leads, every running
// node knows it and its admin address, and every running node is
// registered in every running node's state. It returns the leader's ID.
func (c *Cluster) WaitStable() int32 {
	c.t.Helper()
	var leader int32 = -1
	testwait.For(c.t, Timeout, "a stable leader known to every node", func() bool {
		nodes := c.Running()
		leader = -1
		for id, n := range nodes {
			if n.IsLeader() {
				if leader != -1 {
					return false
				}
				leader = id
			}
		}
		if leader == -1 {
			return false
		}
		for _, n := range nodes {
			if id, addr := n.Leader(); id != leader || addr != AdminAddr(leader) {
				return false
			}
			registered := true
			n.FSM().Read(func(s *fsm.State) {
				for id := range nodes {
					if sc := s.Sidecars[id]; sc == nil || sc.AdminAddr != AdminAddr(id) || sc.RaftAddr != RaftAddr(id) {
						registered = false
					}
				}
			})
			if !registered {
				return false
			}
		}
		return true
	})
	return leader
}

// WaitAll waits until cond holds for the state of every running node.
func (c *Cluster) WaitAll(what string, cond func(*fsm.State) bool) {
	c.t.Helper()
	testwait.For(c.t, Timeout, what+" on every node", func() bool {
		for _, n := range c.Running() {
			ok := false
			n.FSM().Read(func(s *fsm.State) { ok = cond(s) })
			if !ok {
				return false
			}
		}
		return true
	})
}

// Follower returns a node of nodes other than leader.
func Follower(t *testing.T, nodes map[int32]*raftnode.Node, leader int32) (int32, *raftnode.Node) {
	t.Helper()
	for id, n := range nodes {
		if id != leader {
			return id, n
		}
	}
	t.Fatal("no follower")
	return -1, nil
}

// ApplyOK applies c on n and fails the test on any top-level error.
func ApplyOK(t *testing.T, n *raftnode.Node, c fsm.Command) fsm.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	res, err := n.ApplyCommand(ctx, c)
	if err != nil {
		t.Fatalf("Apply %T: %v", c, err)
	}
	if res.ErrorCode != 0 {
		t.Fatalf("Apply %T: error %d: %s", c, res.ErrorCode, res.ErrorMessage)
	}
	return res
}

// HasMirror is a WaitAll condition: the state holds mirror name.
func HasMirror(name string) func(*fsm.State) bool {
	return func(s *fsm.State) bool { return s.Mirrors[name] != nil }
}
