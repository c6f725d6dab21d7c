package raftnode_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/protocol"
)

// TestPeerGuard: an authenticated peer may register only itself; its other
// commands, and every command without peer security, pass.
func TestPeerGuard(t *testing.T) {
	var passed []string
	next := protocol.HandlerFunc(func(_ context.Context, _ *protocol.ConnInfo, req protocol.Request) protocol.Response {
		cmd, _ := fsm.DecodeCommand(req.(*protocol.ApplyCommandRequest).Command)
		passed = append(passed, cmd.Type().String())
		return &protocol.ApplyCommandResponse{}
	})
	guard := raftnode.PeerGuard(next, zaptest.NewLogger(t))
	encode := func(c fsm.Command) *protocol.ApplyCommandRequest {
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		return &protocol.ApplyCommandRequest{Command: b}
	}
	peer2 := &protocol.ConnInfo{Peer: &protocol.PeerIdentity{BrokerID: 2}}
	other := encode(fsm.RegisterSidecar{ID: 3, RaftAddr: "10.6.6.6:9192", AdminAddr: "10.6.6.6:9191"})
	resp := guard.Handle(context.Background(), peer2, other).(*protocol.ApplyCommandResponse)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "broker 2 may register only itself") {
		t.Errorf("broker 2 registering broker 3: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	if len(passed) != 0 {
		t.Fatalf("the re-registration reached the node: %v", passed)
	}
	for _, c := range []struct {
		info *protocol.ConnInfo
		req  *protocol.ApplyCommandRequest
	}{
		{peer2, encode(fsm.RegisterSidecar{ID: 2, RaftAddr: "10.0.0.2:9192", AdminAddr: "10.0.0.2:9191"})},
		{peer2, encode(fsm.CreateMirror{Name: "m", Config: fsmtest.BootstrapConfig()})},
		{&protocol.ConnInfo{}, other}, // peer.security.protocol=PLAINTEXT: nobody is authenticated
	} {
		if r := guard.Handle(context.Background(), c.info, c.req).(*protocol.ApplyCommandResponse); r.ErrorCode != 0 {
			t.Errorf("refused: %d %v", r.ErrorCode, r.ErrorMessage)
		}
	}
	if len(passed) != 3 {
		t.Errorf("passed %v, want 3 commands", passed)
	}
}

// TestAddMemberNobodyAnswers: a member that does not answer at its raft
// address is not added (it would be a voter that never votes), and the
// group keeps working.
func TestAddMemberNobodyAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n, err := raftnode.OpenNode(raftnode.NodeConfig{
		ID: 1, BindAddr: addr, DataDir: t.TempDir(), Peers: []raftnode.Peer{{ID: 1, Address: addr}},
		Logger: zaptest.NewLogger(t), HeartbeatTimeout: 200 * time.Millisecond,
		ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: "before", Config: fsmtest.BootstrapConfig()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = n.AddMember(ctx, 99, "127.0.0.1:1")
	if !errors.Is(err, raftnode.ErrInvalidMember) || !strings.Contains(err.Error(), "broker 99 cannot be added at raft address 127.0.0.1:1") {
		t.Fatalf("AddMember(99, 127.0.0.1:1) = %v", err)
	}
	members, err := n.Members()
	if err != nil || len(members) != 1 {
		t.Fatalf("members %+v, %v", members, err)
	}
	if !n.IsLeader() {
		t.Fatal("the node lost leadership")
	}
	raftnodetest.ApplyOK(t, n, fsm.CreateMirror{Name: "after", Config: fsmtest.BootstrapConfig()})

	// A probe that fails refuses too (peer TLS: a certificate for another
	// broker at the address).
	c := raftnodetest.New(t, 1)
	cfg := c.Config(1, c.Connect(1))
	cfg.Probe = func(context.Context, int32, string) error { return errors.New("the certificate names broker 7") }
	n1, err := raftnode.OpenNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Add(1, n1)
	if c.WaitStable() != 1 {
		t.Fatal("no leader")
	}
	if _, err := n1.AddMember(ctx, 5, "raft-5"); !errors.Is(err, raftnode.ErrInvalidMember) || !strings.Contains(err.Error(), "names broker 7") {
		t.Errorf("AddMember with a failing probe = %v", err)
	}
}
