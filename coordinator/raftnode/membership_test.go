package raftnode_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

func membershipCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), raftnodetest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// TestMembershipRules runs the join rules on the leader of three in-memory
// nodes, with servers that do not run (raft commits a change with the
// majority of the new configuration, which the three running nodes are).
func TestMembershipRules(t *testing.T) {
	c := raftnodetest.New(t, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		c.Start(id)
	}
	leaderID := c.WaitStable()
	leader := c.Running()[leaderID]
	ctx := membershipCtx(t)

	type step struct {
		name    string
		run     func() error
		wantErr error  // matched with errors.Is; nil for success
		wantMsg string // part of the error message
		members string // the configuration afterwards, as "id@address,..."
	}
	add := func(id int32, addr string) func() error {
		return func() error { _, err := leader.AddMember(ctx, id, addr); return err }
	}
	remove := func(id int32) func() error { return func() error { return leader.RemoveMember(ctx, id) } }
	base := "1@raft-1,2@raft-2,3@raft-3"
	for _, s := range []step{
		{name: "same ID and address is a no-op", run: add(2, raftnodetest.RaftAddr(2)), members: base},
		{name: "a new member", run: add(9, "raft-9:1"), members: base + ",9@raft-9:1"},
		{name: "an ID at another address replaces the stale entry", run: add(9, "raft-9b:1"), members: base + ",9@raft-9b:1"},
		{name: "an address under another ID replaces the stale entry", run: add(10, "raft-9b:1"), members: base + ",10@raft-9b:1"},
		{name: "an unknown ID cannot be removed", run: remove(11), wantErr: raftnode.ErrUnknownMember,
			wantMsg: "broker 11 is not in the raft group (members: 1, 2, 3, 10)", members: base + ",10@raft-9b:1"},
		{name: "remove a member", run: remove(10), members: base},
		{name: "the leader's own entry is never replaced", run: add(12, raftnodetest.RaftAddr(leaderID)), wantErr: raftnode.ErrInvalidMember,
			wantMsg: "the raft leader", members: base},
		{name: "a negative ID", run: add(-1, "h:1"), wantErr: raftnode.ErrInvalidMember, wantMsg: "negative", members: base},
		{name: "no address", run: add(13, " "), wantErr: raftnode.ErrInvalidMember, wantMsg: "broker 13 has no raft address", members: base},
	} {
		t.Run(s.name, func(t *testing.T) {
			err := s.run()
			switch {
			case s.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case s.wantErr != nil && !errors.Is(err, s.wantErr):
				t.Fatalf("error %v, want %v", err, s.wantErr)
			case s.wantErr != nil && !strings.Contains(err.Error(), s.wantMsg):
				t.Fatalf("error %q does not contain %q", err, s.wantMsg)
			}
			ms, err := leader.Members()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				if !m.Voter {
					t.Errorf("member %d is not a voter", m.ID)
				}
				got = append(got, strings.Join([]string{itoa(m.ID), m.Address}, "@"))
			}
			if strings.Join(got, ",") != s.members {
				t.Fatalf("members %s, want %s", strings.Join(got, ","), s.members)
			}
		})
	}

	// A follower refuses and names the leader.
	_, f := raftnodetest.Follower(t, c.Running(), leaderID)
	var nle *raftnode.NotLeaderError
	if _, err := f.AddMember(ctx, 9, "raft-9:1"); !errors.As(err, &nle) || nle.LeaderAdminAddr != raftnodetest.AdminAddr(leaderID) {
		t.Fatalf("AddMember on a follower = %v, want a NotLeaderError naming %s", err, raftnodetest.AdminAddr(leaderID))
	}
	if err := f.RemoveMember(ctx, 1); !errors.As(err, &nle) || nle.LeaderID != leaderID {
		t.Fatalf("RemoveMember on a follower = %v, want a NotLeaderError naming %d", err, leaderID)
	}
}

func itoa(id int32) string { return strconv.Itoa(int(id)) }

func TestRemoveLastVoter(t *testing.T) {
	c := raftnodetest.New(t, 4)
	n := c.Start(4)
	testwait.For(t, raftnodetest.Timeout, "leadership", n.IsLeader)
	err := n.RemoveMember(membershipCtx(t), 4)
	if !errors.Is(err, raftnode.ErrLastVoter) || !strings.Contains(err.Error(), "broker 4 is the last voter") {
		t.Fatalf("RemoveMember(last voter) = %v, want ErrLastVoter", err)
	}
	if got := memberIDs(t, n); got != "4" {
		t.Fatalf("members %s after a refused removal", got)
	}
}

// memberIDs returns the IDs in n's raft configuration as "1,2,3".
func memberIDs(t *testing.T, n *raftnode.Node) string {
	t.Helper()
	ms, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, strconv.Itoa(int(m.ID)))
	}
	return strings.Join(ids, ",")
}
