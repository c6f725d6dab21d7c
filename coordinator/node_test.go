package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap/zaptest"
)

const clusterTimeout = 20 * time.Second

// testCluster runs raft nodes on raft's in-memory transport, with boltdb
// stores in temporary directories, and is their Forwarder: it calls the
// ApplyLocal of the node registered under the admin address, as the admin
// endpoint does.
type testCluster struct {
	t        *testing.T
	peers    []Peer
	dirs     map[int32]string
	forwards atomic.Int64

	mu    sync.Mutex
	nodes map[int32]*Node
	trans map[int32]*raft.InmemTransport
}

func raftAddr(id int32) string  { return fmt.Sprintf("raft-%d", id) }
func adminAddr(id int32) string { return fmt.Sprintf("admin-%d", id) }

func newTestCluster(t *testing.T, ids ...int32) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dirs: map[int32]string{}, nodes: map[int32]*Node{}, trans: map[int32]*raft.InmemTransport{}}
	for _, id := range ids {
		c.peers = append(c.peers, Peer{ID: id, Address: raftAddr(id)})
		c.dirs[id] = t.TempDir()
	}
	t.Cleanup(func() {
		for _, id := range ids {
			c.stop(id)
		}
	})
	return c
}

// Forward implements Forwarder.
func (c *testCluster) Forward(ctx context.Context, addr string, cmd []byte) (Result, error) {
	c.forwards.Add(1)
	c.mu.Lock()
	var target *Node
	for id, n := range c.nodes {
		if adminAddr(id) == addr {
			target = n
		}
	}
	c.mu.Unlock()
	if target == nil {
		return Result{}, fmt.Errorf("dial %s: connection refused: %w", addr, ErrNotDelivered)
	}
	return target.ApplyLocal(ctx, cmd)
}

func (c *testCluster) config(id int32, trans raft.Transport) NodeConfig {
	return NodeConfig{
		ID:                 id,
		DataDir:            c.dirs[id],
		Peers:              c.peers,
		AdminAddr:          adminAddr(id),
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

// start opens node id on a fresh in-memory transport connected both ways
// to every other transport; the others drop their routes (and pipelines) to
// the node's previous transport first, as TCP connections to a restarted
// process break.
func (c *testCluster) start(id int32) *Node {
	c.t.Helper()
	_, tr := raft.NewInmemTransport(raft.ServerAddress(raftAddr(id)))
	c.mu.Lock()
	for other, ot := range c.trans {
		if other != id {
			ot.Disconnect(tr.LocalAddr())
			tr.Connect(ot.LocalAddr(), ot)
			ot.Connect(tr.LocalAddr(), tr)
		}
	}
	c.trans[id] = tr
	c.mu.Unlock()
	n, err := OpenNode(c.config(id, tr))
	if err != nil {
		c.t.Fatalf("OpenNode(%d): %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	return n
}

// stop closes node id, if running, and makes the others' RPCs to it fail
// at once, as with a closed TCP port.
func (c *testCluster) stop(id int32) {
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
			ot.Disconnect(raft.ServerAddress(raftAddr(id)))
		}
	}
}

func (c *testCluster) running() map[int32]*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[int32]*Node, len(c.nodes))
	for id, n := range c.nodes {
		m[id] = n
	}
	return m
}

// waitStable waits until exactly one running node leads, every running
// node knows it and its admin address, and every running node is
// registered in every running node's state. It returns the leader's ID.
func (c *testCluster) waitStable() int32 {
	c.t.Helper()
	var leader int32 = -1
	waitFor(c.t, clusterTimeout, "a stable leader known to every node", func() bool {
		nodes := c.running()
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
			if id, addr := n.Leader(); id != leader || addr != adminAddr(leader) {
				return false
			}
			registered := true
			n.FSM().Read(func(s *State) {
				for id := range nodes {
					if sc := s.Sidecars[id]; sc == nil || sc.AdminAddr != adminAddr(id) || sc.RaftAddr != raftAddr(id) {
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

// waitAll waits until cond holds for the state of every running node.
func (c *testCluster) waitAll(what string, cond func(*State) bool) {
	c.t.Helper()
	waitFor(c.t, clusterTimeout, what+" on every node", func() bool {
		for _, n := range c.running() {
			ok := false
			n.FSM().Read(func(s *State) { ok = cond(s) })
			if !ok {
				return false
			}
		}
		return true
	})
}

func follower(t *testing.T, nodes map[int32]*Node, leader int32) (int32, *Node) {
	t.Helper()
	for id, n := range nodes {
		if id != leader {
			return id, n
		}
	}
	t.Fatal("no follower")
	return -1, nil
}

func applyOK(t *testing.T, n *Node, c Command) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
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

func hasMirror(name string) func(*State) bool {
	return func(s *State) bool { return s.Mirrors[name] != nil }
}

func TestThreeNodeCluster(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		if n := c.start(id); !n.bootstrapped {
			t.Fatalf("node %d did not bootstrap a fresh data directory", id)
		}
	}
	leader := c.waitStable()

	// A follower forwards to the leader and reads its own write at once.
	fid, f := follower(t, c.running(), leader)
	before := c.forwards.Load()
	applyOK(t, f, CreateMirror{Name: "dr", Config: bootstrapConfig(), NowMs: 1})
	if c.forwards.Load() == before {
		t.Fatalf("apply on follower %d was not forwarded", fid)
	}
	f.FSM().Read(func(s *State) {
		if s.Mirrors["dr"] == nil {
			t.Fatal("follower does not read its own write")
		}
	})
	c.waitAll("mirror dr", hasMirror("dr"))

	// Command errors come back as results, not errors.
	res, err := f.ApplyCommand(context.Background(), CreateMirror{Name: "dr", Config: bootstrapConfig()})
	if err != nil || res.ErrorCode != kerr.InvalidRequest.Code || !strings.Contains(res.ErrorMessage, "mirror dr already exists") {
		t.Fatalf("duplicate create via follower = %+v, %v", res, err)
	}

	// ApplyLocal on a follower names the leader.
	_, err = f.ApplyLocal(context.Background(), mustEncode(t, DeleteMirror{Name: "dr"}))
	var nle *NotLeaderError
	if !errors.As(err, &nle) || !errors.Is(err, ErrNotLeader) || nle.LeaderAdminAddr != adminAddr(leader) ||
		!strings.Contains(err.Error(), adminAddr(leader)) {
		t.Fatalf("ApplyLocal on follower = %v, want a NotLeaderError naming %s", err, adminAddr(leader))
	}

	// Close the leader: another one takes over and applies keep working.
	c.stop(leader)
	newLeader := c.waitStable()
	if newLeader == leader {
		t.Fatalf("closed node %d still leads", leader)
	}
	_, f = follower(t, c.running(), newLeader)
	applyOK(t, f, StartTopics{Mirror: "dr", Topics: []StartTopic{{Name: "orders", Partitions: 3}}, NowMs: 2})
	c.waitAll("topic orders", func(s *State) bool { return s.Topics["orders"] != nil })

	// Reopen the closed node on its data directory: it rejoins without
	// bootstrapping and catches up.
	n := c.start(leader)
	if n.bootstrapped {
		t.Fatal("reopened node bootstrapped again")
	}
	c.waitAll("topic orders", func(s *State) bool { return s.Topics["orders"] != nil && s.Mirrors["dr"] != nil })
	c.waitStable()
	applyOK(t, n, SetTopicStatus{Mirror: "dr", Topics: []string{"orders"}, Status: TopicPaused, NowMs: 3})
	c.waitAll("topic orders paused", func(s *State) bool { return s.Topics["orders"].Status == TopicPaused })
}

func TestSingleNode(t *testing.T) {
	c := newTestCluster(t, 7)
	reg := prometheus.NewRegistry()
	_, tr := raft.NewInmemTransport(raft.ServerAddress(raftAddr(7)))
	cfg := c.config(7, tr)
	cfg.Forwarder, cfg.AdminAddr = nil, "" // neither is needed by a group of one
	cfg.Registerer = reg
	n, err := OpenNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })

	select {
	case leader := <-n.LeaderCh():
		if !leader {
			t.Fatal("LeaderCh delivered false first")
		}
	case <-time.After(clusterTimeout):
		t.Fatal("single node did not become leader")
	}
	applyOK(t, n, CreateMirror{Name: "solo", Config: bootstrapConfig()})
	if !n.IsLeader() {
		t.Fatal("IsLeader = false")
	}
	waitFor(t, clusterTimeout, "self-registration", func() bool {
		id, _ := n.Leader()
		registered := false
		n.FSM().Read(func(s *State) { registered = s.Sidecars[7] != nil })
		return id == 7 && registered
	})
	if got := gauge(t, reg, "sidemirror_raft_leader"); got != 1 {
		t.Fatalf("sidemirror_raft_leader = %v", got)
	}
	if got := gauge(t, reg, "sidemirror_raft_applied_index"); got < 2 {
		t.Fatalf("sidemirror_raft_applied_index = %v", got)
	}

	// A snapshot plus later log entries survive a restart.
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("raft snapshot: %v", err)
	}
	applyOK(t, n, CreateMirror{Name: "after-snapshot", Config: bootstrapConfig()})
	var want *State
	n.FSM().Read(func(s *State) { want = s.Clone() })
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, clusterTimeout, "LeaderCh closed by Close", func() bool {
		select {
		case _, open := <-n.LeaderCh():
			return !open
		default:
			return false
		}
	})
	if _, err := n.ApplyCommand(context.Background(), DeleteMirror{Name: "solo"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close = %v, want ErrClosed", err)
	}

	_, cfg.Transport = raft.NewInmemTransport(raft.ServerAddress(raftAddr(7)))
	n2, err := OpenNode(cfg) // the metrics were unregistered: no duplicate registration
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n2.Close() })
	if n2.bootstrapped {
		t.Fatal("reopened single node bootstrapped again")
	}
	waitFor(t, clusterTimeout, "restored state", func() bool {
		ok := false
		n2.FSM().Read(func(s *State) { ok = s.Mirrors["solo"] != nil && s.Mirrors["after-snapshot"] != nil })
		return ok
	})
	var got *State
	n2.FSM().Read(func(s *State) { got = s.Clone() })
	if len(got.Mirrors) != len(want.Mirrors) {
		t.Fatalf("mirrors after restart = %v, want %v", got.MirrorNames(), want.MirrorNames())
	}
}

func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func TestApplyWithoutLeader(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	n := c.start(1) // alone: no quorum, no leader
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := n.ApplyCommand(ctx, CreateMirror{Name: "x", Config: bootstrapConfig()})
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "coordinator: no raft leader known") {
		t.Fatalf("Apply without leader = %v, want ErrNoLeader with the deadline", err)
	}
}

func TestNodeConfigValidation(t *testing.T) {
	fwd := &testCluster{}
	base := func() NodeConfig {
		_, tr := raft.NewInmemTransport("raft-1")
		return NodeConfig{ID: 1, DataDir: t.TempDir(), Transport: tr, AdminAddr: "admin-1", Forwarder: fwd,
			Peers: []Peer{{1, "raft-1"}, {2, "raft-2"}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*NodeConfig)
		want   string
	}{
		{"negative ID", func(c *NodeConfig) { c.ID = -1 }, "ID -1 is negative"},
		{"no data dir", func(c *NodeConfig) { c.DataDir = "" }, "DataDir is empty"},
		{"no transport or bind address", func(c *NodeConfig) { c.Transport = nil }, "BindAddr is empty"},
		{"no peers", func(c *NodeConfig) { c.Peers = nil }, "Peers is empty"},
		{"self not in peers", func(c *NodeConfig) { c.Peers = []Peer{{2, "raft-2"}, {3, "raft-3"}} }, "does not list this sidecar (ID 1)"},
		{"duplicate ID", func(c *NodeConfig) { c.Peers = []Peer{{1, "raft-1"}, {1, "raft-2"}} }, "ID 1 is listed twice"},
		{"duplicate address", func(c *NodeConfig) { c.Peers = []Peer{{1, "raft-1"}, {2, "raft-1"}} }, "raft-1 is listed twice"},
		{"peer without address", func(c *NodeConfig) { c.Peers = []Peer{{1, "raft-1"}, {2, ""}} }, "sidecar 2 has no raft address"},
		{"no forwarder", func(c *NodeConfig) { c.Forwarder = nil }, "Forwarder is nil"},
		{"no admin address", func(c *NodeConfig) { c.AdminAddr = "" }, "AdminAddr is empty"},
		{"own address differs from transport", func(c *NodeConfig) { c.Peers = []Peer{{1, "raft-x"}, {2, "raft-2"}} }, "at raft-x, but its raft transport is at raft-1"},
		{"lease above heartbeat", func(c *NodeConfig) { c.LeaderLeaseTimeout = 5 * time.Second }, "raft timing"},
		{"negative timeout", func(c *NodeConfig) { c.CommitTimeout = -1 }, "CommitTimeout -1ns is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.change(&cfg)
			n, err := OpenNode(cfg)
			if err == nil {
				_ = n.Close()
			}
			if !errors.Is(err, ErrInvalidNodeConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OpenNode = %v, want ErrInvalidNodeConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestStoreLockedByAnotherNode(t *testing.T) {
	c := newTestCluster(t, 1)
	c.start(1)
	cfg := c.config(1, nil)
	_, cfg.Transport = raft.NewInmemTransport(raft.ServerAddress(raftAddr(1)))
	if _, err := OpenNode(cfg); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second OpenNode on one data directory = %v, want a lock error", err)
	}
}

func TestResolveLost(t *testing.T) {
	c := newTestCluster(t, 1)
	n := c.start(1)
	cmd := mustEncode(t, CreateMirror{Name: "m", Config: bootstrapConfig()})
	res := applyOK(t, n, CreateMirror{Name: "m", Config: bootstrapConfig()})
	// The same bytes once more: rejected as a duplicate at a new index.
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	dup, err := n.Apply(ctx, cmd)
	if err != nil || dup.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate = %+v, %v", dup, err)
	}

	for _, tc := range []struct {
		name    string
		index   uint64
		cmd     []byte
		timeout time.Duration
		want    Result
		wantErr []error
	}{
		{"committed: its own result", res.Index, cmd, clusterTimeout, res, nil},
		{"committed duplicate: its own result", dup.Index, cmd, clusterTimeout, dup, nil},
		{"another entry at the index: dropped", res.Index, mustEncode(t, DeleteMirror{Name: "m"}), clusterTimeout, Result{}, []error{ErrNotLeader}},
		{"index not reached: unknown", dup.Index + 1000, cmd, 100 * time.Millisecond, Result{}, []error{raft.ErrLeadershipLost, context.DeadlineExceeded}},
		{"no index: unknown", 0, cmd, clusterTimeout, Result{}, []error{raft.ErrLeadershipLost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			got, err := n.resolveLost(ctx, tc.index, tc.cmd)
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Fatalf("resolveLost = %v, want an error matching %v", err, want)
				}
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("resolveLost: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("resolveLost = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTCPTransport runs a group of one on the default TCP transport.
func TestTCPTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n, err := OpenNode(NodeConfig{
		ID: 4, BindAddr: addr, DataDir: t.TempDir(), Peers: []Peer{{4, addr}},
		Logger: zaptest.NewLogger(t), HeartbeatTimeout: 200 * time.Millisecond,
		ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	applyOK(t, n, CreateMirror{Name: "tcp", Config: bootstrapConfig()})
	waitFor(t, clusterTimeout, "self-registration with the raft address", func() bool {
		ok := false
		n.FSM().Read(func(s *State) { ok = s.Sidecars[4] != nil && s.Sidecars[4].RaftAddr == addr })
		return ok
	})
}

// TestWaitCaughtUpAfterRestart restarts a follower that missed many
// commands: WaitCaughtUp must not return before its state holds the last
// one, although raft hands the entries over in several batches.
func TestWaitCaughtUpAfterRestart(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		c.start(id)
	}
	leader := c.waitStable()
	fid, _ := follower(t, c.running(), leader)
	c.stop(fid)
	const n = 300
	l := c.running()[leader]
	for i := range n {
		applyOK(t, l, CreateMirror{Name: fmt.Sprintf("m-%03d", i), Config: bootstrapConfig(), NowMs: int64(i)})
	}
	f := c.start(fid)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := f.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("WaitCaughtUp on the restarted follower: %v", err)
	}
	last := fmt.Sprintf("m-%03d", n-1)
	f.FSM().Read(func(s *State) {
		if s.Mirrors[last] == nil {
			t.Fatalf("WaitCaughtUp returned before the follower applied mirror %s (%d mirrors known)", last, len(s.Mirrors))
		}
	})

	// Within the same term a caught-up follower needs no more round trips.
	before := c.forwards.Load()
	for range 10 {
		if err := f.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.forwards.Load() - before; got != 0 {
		t.Fatalf("WaitCaughtUp forwarded %d barriers after the follower had caught up in this term", got)
	}
}
