package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

func TestThreeNodeCluster(t *testing.T) {
	c := raftnodetest.New(t, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		if n := c.Start(id); !n.Bootstrapped() {
			t.Fatalf("node %d did not bootstrap a fresh data directory", id)
		}
	}
	leader := c.WaitStable()

	// A follower forwards to the leader and reads its own write at once.
	fid, f := raftnodetest.Follower(t, c.Running(), leader)
	before := c.Forwards()
	raftnodetest.ApplyOK(t, f, fsm.CreateMirror{Name: "dr", Config: fsmtest.BootstrapConfig(), NowMs: 1})
	if c.Forwards() == before {
		t.Fatalf("apply on follower %d was not forwarded", fid)
	}
	f.FSM().Read(func(s *fsm.State) {
		if s.Mirrors["dr"] == nil {
			t.Fatal("follower does not read its own write")
		}
	})
	c.WaitAll("mirror dr", raftnodetest.HasMirror("dr"))

	// Command errors come back as results, not errors.
	res, err := f.ApplyCommand(context.Background(), fsm.CreateMirror{Name: "dr", Config: fsmtest.BootstrapConfig()})
	if err != nil || res.ErrorCode != kerr.InvalidRequest.Code || !strings.Contains(res.ErrorMessage, "mirror dr already exists") {
		t.Fatalf("duplicate create via follower = %+v, %v", res, err)
	}

	// ApplyLocal on a follower names the leader.
	_, err = f.ApplyLocal(context.Background(), fsmtest.MustEncode(t, fsm.DeleteMirror{Name: "dr"}))
	var nle *raftnode.NotLeaderError
	if !errors.As(err, &nle) || !errors.Is(err, raftnode.ErrNotLeader) || nle.LeaderAdminAddr != raftnodetest.AdminAddr(leader) ||
		!strings.Contains(err.Error(), raftnodetest.AdminAddr(leader)) {
		t.Fatalf("ApplyLocal on follower = %v, want a NotLeaderError naming %s", err, raftnodetest.AdminAddr(leader))
	}

	// Close the leader: another one takes over and applies keep working.
	c.Stop(leader)
	newLeader := c.WaitStable()
	if newLeader == leader {
		t.Fatalf("closed node %d still leads", leader)
	}
	_, f = raftnodetest.Follower(t, c.Running(), newLeader)
	raftnodetest.ApplyOK(t, f, fsm.StartTopics{Mirror: "dr", Topics: []fsm.StartTopic{{Name: "orders", Partitions: 3}}, NowMs: 2})
	c.WaitAll("topic orders", func(s *fsm.State) bool { return s.Topics["orders"] != nil })

	// Reopen the closed node on its data directory: it rejoins without
	// bootstrapping and catches up.
	n := c.Start(leader)
	if n.Bootstrapped() {
		t.Fatal("reopened node bootstrapped again")
	}
	c.WaitAll("topic orders", func(s *fsm.State) bool { return s.Topics["orders"] != nil && s.Mirrors["dr"] != nil })
	c.WaitStable()
	raftnodetest.ApplyOK(t, n, fsm.SetTopicStatus{Mirror: "dr", Topics: []string{"orders"}, Status: fsm.TopicPaused, NowMs: 3})
	c.WaitAll("topic orders paused", func(s *fsm.State) bool { return s.Topics["orders"].Status == fsm.TopicPaused })
}

func TestSingleNode(t *testing.T) {
	c := raftnodetest.New(t, 7)
	reg := prometheus.NewRegistry()
	_, tr := raft.NewInmemTransport(raft.ServerAddress(raftnodetest.RaftAddr(7)))
	cfg := c.Config(7, tr)
	cfg.Forwarder, cfg.AdminAddr = nil, "" // neither is needed by a group of one
	cfg.Registerer = reg
	n, err := raftnode.OpenNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })

	select {
	case leader := <-n.LeaderCh():
		if !leader {
			t.Fatal("LeaderCh delivered false first")
		}
	case <-time.After(raftnodetest.Timeout):
		t.Fatal("single node did not become leader")
	}
	raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: "solo", Config: fsmtest.BootstrapConfig()})
	if !n.IsLeader() {
		t.Fatal("IsLeader = false")
	}
	testwait.For(t, raftnodetest.Timeout, "self-registration", func() bool {
		id, _ := n.Leader()
		registered := false
		n.FSM().Read(func(s *fsm.State) { registered = s.Sidecars[7] != nil })
		return id == 7 && registered
	})
	if got := gauge(t, reg, "sidemirror_raft_leader"); got != 1 {
		t.Fatalf("sidemirror_raft_leader = %v", got)
	}
	if got := gauge(t, reg, "sidemirror_raft_applied_index"); got < 2 {
		t.Fatalf("sidemirror_raft_applied_index = %v", got)
	}

	// A snapshot plus later log entries survive a restart.
	if err := n.Snapshot(); err != nil {
		t.Fatalf("raft snapshot: %v", err)
	}
	raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: "after-snapshot", Config: fsmtest.BootstrapConfig()})
	var want *fsm.State
	n.FSM().Read(func(s *fsm.State) { want = s.Clone() })
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, raftnodetest.Timeout, "LeaderCh closed by Close", func() bool {
		select {
		case _, open := <-n.LeaderCh():
			return !open
		default:
			return false
		}
	})
	if _, err := n.ApplyCommand(context.Background(), fsm.DeleteMirror{Name: "solo"}); !errors.Is(err, raftnode.ErrClosed) {
		t.Fatalf("Apply after Close = %v, want ErrClosed", err)
	}

	_, cfg.Transport = raft.NewInmemTransport(raft.ServerAddress(raftnodetest.RaftAddr(7)))
	n2, err := raftnode.OpenNode(cfg) // the metrics were unregistered: no duplicate registration
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n2.Close() })
	if n2.Bootstrapped() {
		t.Fatal("reopened single node bootstrapped again")
	}
	testwait.For(t, raftnodetest.Timeout, "restored state", func() bool {
		ok := false
		n2.FSM().Read(func(s *fsm.State) { ok = s.Mirrors["solo"] != nil && s.Mirrors["after-snapshot"] != nil })
		return ok
	})
	var got *fsm.State
	n2.FSM().Read(func(s *fsm.State) { got = s.Clone() })
	if len(got.Mirrors) != len(want.Mirrors) {
		t.Fatalf("mirrors after restart = %v, want %v", got.MirrorNames(), want.MirrorNames())
	}
}

// TestSnapshotThreshold checks that SnapshotThreshold and
// SnapshotInterval reach raft: with a threshold of 3 entries (the default
// is 8192) a few applies make the node write a snapshot to data.dir on its
// own.
func TestSnapshotThreshold(t *testing.T) {
	c := raftnodetest.New(t, 7)
	_, tr := raft.NewInmemTransport(raft.ServerAddress(raftnodetest.RaftAddr(7)))
	cfg := c.Config(7, tr)
	cfg.Forwarder, cfg.AdminAddr = nil, ""
	cfg.SnapshotThreshold, cfg.SnapshotInterval = 3, 50*time.Millisecond
	n, err := raftnode.OpenNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	snapshots := func() int {
		entries, _ := os.ReadDir(filepath.Join(cfg.DataDir, "raft", "snapshots"))
		return len(entries)
	}
	if got := snapshots(); got != 0 {
		t.Fatalf("%d snapshots before any entry", got)
	}
	for i := range 5 {
		raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: fmt.Sprint("m", i), Config: fsmtest.BootstrapConfig()})
	}
	testwait.For(t, raftnodetest.Timeout, "a snapshot in data.dir", func() bool { return snapshots() > 0 })
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
	c := raftnodetest.New(t, 1, 2, 3)
	n := c.Start(1) // alone: no quorum, no leader
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := n.ApplyCommand(ctx, fsm.CreateMirror{Name: "x", Config: fsmtest.BootstrapConfig()})
	if !errors.Is(err, raftnode.ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "coordinator: no raft leader known") {
		t.Fatalf("Apply without leader = %v, want ErrNoLeader with the deadline", err)
	}
}

func TestNodeConfigValidation(t *testing.T) {
	fwd := &raftnodetest.Cluster{}
	base := func() raftnode.NodeConfig {
		_, tr := raft.NewInmemTransport("raft-1")
		return raftnode.NodeConfig{ID: 1, DataDir: t.TempDir(), Transport: tr, AdminAddr: "admin-1", Forwarder: fwd,
			Peers: []raftnode.Peer{{ID: 1, Address: "raft-1"}, {ID: 2, Address: "raft-2"}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*raftnode.NodeConfig)
		want   string
	}{
		{"negative ID", func(c *raftnode.NodeConfig) { c.ID = -1 }, "ID -1 is negative"},
		{"no data dir", func(c *raftnode.NodeConfig) { c.DataDir = "" }, "DataDir is empty"},
		{"no transport or bind address", func(c *raftnode.NodeConfig) { c.Transport = nil }, "BindAddr is empty"},
		{"no peers", func(c *raftnode.NodeConfig) { c.Peers = nil }, "Peers is empty"},
		{"self not in peers", func(c *raftnode.NodeConfig) {
			c.Peers = []raftnode.Peer{{ID: 2, Address: "raft-2"}, {ID: 3, Address: "raft-3"}}
		}, "does not list this sidecar (ID 1)"},
		{"duplicate ID", func(c *raftnode.NodeConfig) {
			c.Peers = []raftnode.Peer{{ID: 1, Address: "raft-1"}, {ID: 1, Address: "raft-2"}}
		}, "ID 1 is listed twice"},
		{"duplicate address", func(c *raftnode.NodeConfig) {
			c.Peers = []raftnode.Peer{{ID: 1, Address: "raft-1"}, {ID: 2, Address: "raft-1"}}
		}, "raft-1 is listed twice"},
		{"peer without address", func(c *raftnode.NodeConfig) {
			c.Peers = []raftnode.Peer{{ID: 1, Address: "raft-1"}, {ID: 2, Address: ""}}
		}, "sidecar 2 has no raft address"},
		{"no forwarder", func(c *raftnode.NodeConfig) { c.Forwarder = nil }, "Forwarder is nil"},
		{"no admin address", func(c *raftnode.NodeConfig) { c.AdminAddr = "" }, "AdminAddr is empty"},
		{"own address differs from transport", func(c *raftnode.NodeConfig) {
			c.Peers = []raftnode.Peer{{ID: 1, Address: "raft-x"}, {ID: 2, Address: "raft-2"}}
		}, "at raft-x, but its raft transport is at raft-1"},
		{"lease above heartbeat", func(c *raftnode.NodeConfig) { c.LeaderLeaseTimeout = 5 * time.Second }, "raft timing"},
		{"negative timeout", func(c *raftnode.NodeConfig) { c.CommitTimeout = -1 }, "CommitTimeout -1ns is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.change(&cfg)
			n, err := raftnode.OpenNode(cfg)
			if err == nil {
				_ = n.Close()
			}
			if !errors.Is(err, raftnode.ErrInvalidNodeConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OpenNode = %v, want ErrInvalidNodeConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestStoreLockedByAnotherNode(t *testing.T) {
	c := raftnodetest.New(t, 1)
	c.Start(1)
	cfg := c.Config(1, nil)
	_, cfg.Transport = raft.NewInmemTransport(raft.ServerAddress(raftnodetest.RaftAddr(1)))
	if _, err := raftnode.OpenNode(cfg); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second OpenNode on one data directory = %v, want a lock error", err)
	}
}

func TestResolveLost(t *testing.T) {
	c := raftnodetest.New(t, 1)
	n := c.Start(1)
	cmd := fsmtest.MustEncode(t, fsm.CreateMirror{Name: "m", Config: fsmtest.BootstrapConfig()})
	res := raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: "m", Config: fsmtest.BootstrapConfig()})
	// The same bytes once more: rejected as a duplicate at a new index.
	ctx, cancel := context.WithTimeout(context.Background(), raftnodetest.Timeout)
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
		want    fsm.Result
		wantErr []error
	}{
		{"committed: its own result", res.Index, cmd, raftnodetest.Timeout, res, nil},
		{"committed duplicate: its own result", dup.Index, cmd, raftnodetest.Timeout, dup, nil},
		{"another entry at the index: dropped", res.Index, fsmtest.MustEncode(t, fsm.DeleteMirror{Name: "m"}), raftnodetest.Timeout, fsm.Result{}, []error{raftnode.ErrNotLeader}},
		{"index not reached: unknown", dup.Index + 1000, cmd, 100 * time.Millisecond, fsm.Result{}, []error{raft.ErrLeadershipLost, context.DeadlineExceeded}},
		{"no index: unknown", 0, cmd, raftnodetest.Timeout, fsm.Result{}, []error{raft.ErrLeadershipLost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			got, err := n.ResolveLost(ctx, tc.index, tc.cmd)
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
	n, err := raftnode.OpenNode(raftnode.NodeConfig{
		ID: 4, BindAddr: addr, DataDir: t.TempDir(), Peers: []raftnode.Peer{{ID: 4, Address: addr}},
		Logger: zaptest.NewLogger(t), HeartbeatTimeout: 200 * time.Millisecond,
		ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: "tcp", Config: fsmtest.BootstrapConfig()})
	testwait.For(t, raftnodetest.Timeout, "self-registration with the raft address", func() bool {
		ok := false
		n.FSM().Read(func(s *fsm.State) { ok = s.Sidecars[4] != nil && s.Sidecars[4].RaftAddr == addr })
		return ok
	})
}

// TestTCPTransportAdvertisesName binds every interface and advertises a
// host name, as a deployment whose raft.peers names hosts does: the node
// starts (its transport's address is the name, equal to its Peers entry,
// not the name resolved) and registers the name. A wildcard address is
// refused as the advertised one.
func TestTCPTransportAdvertisesName(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	name := net.JoinHostPort("localhost", port)
	n, err := raftnode.OpenNode(raftnode.NodeConfig{
		ID: 4, BindAddr: ":" + port, DataDir: t.TempDir(), Peers: []raftnode.Peer{{ID: 4, Address: name}},
		Logger: zaptest.NewLogger(t), HeartbeatTimeout: 200 * time.Millisecond,
		ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: "named", Config: fsmtest.BootstrapConfig()})
	testwait.For(t, raftnodetest.Timeout, "self-registration with the advertised name", func() bool {
		ok := false
		n.FSM().Read(func(s *fsm.State) { ok = s.Sidecars[4] != nil && s.Sidecars[4].RaftAddr == name })
		return ok
	})

	wild := "0.0.0.0:" + port
	_, err = raftnode.OpenNode(raftnode.NodeConfig{
		ID: 5, BindAddr: "127.0.0.1:0", AdvertiseAddr: wild, DataDir: t.TempDir(), Peers: []raftnode.Peer{{ID: 5, Address: wild}},
		Logger: zaptest.NewLogger(t),
	})
	if !errors.Is(err, raftnode.ErrInvalidNodeConfig) || !strings.Contains(err.Error(), `AdvertiseAddr "`+wild+`" is a wildcard address`) {
		t.Fatalf("OpenNode advertising %s = %v, want ErrInvalidNodeConfig naming the wildcard address", wild, err)
	}
}

// TestWaitCaughtUpAfterRestart restarts a follower that missed many
// commands: WaitCaughtUp must not return before its state holds the last
// one, although raft hands the entries over in several batches.
func TestWaitCaughtUpAfterRestart(t *testing.T) {
	c := raftnodetest.New(t, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		c.Start(id)
	}
	leader := c.WaitStable()
	fid, _ := raftnodetest.Follower(t, c.Running(), leader)
	c.Stop(fid)
	const n = 300
	l := c.Running()[leader]
	for i := range n {
		raftnodetest.ApplyOK(t, l, fsm.CreateMirror{Name: fmt.Sprintf("m-%03d", i), Config: fsmtest.BootstrapConfig(), NowMs: int64(i)})
	}
	f := c.Start(fid)
	ctx, cancel := context.WithTimeout(context.Background(), raftnodetest.Timeout)
	defer cancel()
	if err := f.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("WaitCaughtUp on the restarted follower: %v", err)
	}
	last := fmt.Sprintf("m-%03d", n-1)
	f.FSM().Read(func(s *fsm.State) {
		if s.Mirrors[last] == nil {
			t.Fatalf("WaitCaughtUp returned before the follower applied mirror %s (%d mirrors known)", last, len(s.Mirrors))
		}
	})

	// Within the same term a caught-up follower needs no more round trips.
	// A new election in between (a loaded machine can miss heartbeats)
	// rightly costs one more, so the check repeats until a term held.
	testwait.For(t, raftnodetest.Timeout, "ten WaitCaughtUp calls within one term", func() bool {
		term, before := f.Term(), c.Forwards()
		for range 10 {
			if err := f.WaitCaughtUp(ctx); err != nil {
				t.Fatal(err)
			}
		}
		got := c.Forwards() - before
		if f.Term() != term {
			return false
		}
		if got != 0 {
			t.Fatalf("WaitCaughtUp forwarded %d barriers after the follower had caught up in term %d", got, term)
		}
		return true
	})
}
