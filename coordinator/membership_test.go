package coordinator

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/protocol"
)

func membershipCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestMembershipRules runs the join rules on the leader of three in-memory
// nodes, with servers that do not run (raft commits a change with the
// majority of the new configuration, which the three running nodes are).
func TestMembershipRules(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		c.start(id)
	}
	leaderID := c.waitStable()
	leader := c.running()[leaderID]
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
		{name: "same ID and address is a no-op", run: add(2, raftAddr(2)), members: base},
		{name: "a new member", run: add(9, "raft-9:1"), members: base + ",9@raft-9:1"},
		{name: "an ID at another address replaces the stale entry", run: add(9, "raft-9b:1"), members: base + ",9@raft-9b:1"},
		{name: "an address under another ID replaces the stale entry", run: add(10, "raft-9b:1"), members: base + ",10@raft-9b:1"},
		{name: "an unknown ID cannot be removed", run: remove(11), wantErr: ErrUnknownMember,
			wantMsg: "broker 11 is not in the raft group (members: 1, 2, 3, 10)", members: base + ",10@raft-9b:1"},
		{name: "remove a member", run: remove(10), members: base},
		{name: "the leader's own entry is never replaced", run: add(12, raftAddr(leaderID)), wantErr: ErrInvalidMember,
			wantMsg: "the raft leader", members: base},
		{name: "a negative ID", run: add(-1, "h:1"), wantErr: ErrInvalidMember, wantMsg: "negative", members: base},
		{name: "no address", run: add(13, " "), wantErr: ErrInvalidMember, wantMsg: "broker 13 has no raft address", members: base},
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
	_, f := follower(t, c.running(), leaderID)
	var nle *NotLeaderError
	if _, err := f.AddMember(ctx, 9, "raft-9:1"); !errors.As(err, &nle) || nle.LeaderAdminAddr != adminAddr(leaderID) {
		t.Fatalf("AddMember on a follower = %v, want a NotLeaderError naming %s", err, adminAddr(leaderID))
	}
	if err := f.RemoveMember(ctx, 1); !errors.As(err, &nle) || nle.LeaderID != leaderID {
		t.Fatalf("RemoveMember on a follower = %v, want a NotLeaderError naming %d", err, leaderID)
	}
}

func itoa(id int32) string { return strconv.Itoa(int(id)) }

// hasMember reports whether id is in n's raft configuration.
func hasMember(t *testing.T, n *Node, id int32) bool {
	t.Helper()
	return slices.Contains(strings.Split(memberIDs(t, n), ","), itoa(id))
}

func TestRemoveLastVoter(t *testing.T) {
	c := newTestCluster(t, 4)
	n := c.start(4)
	waitFor(t, clusterTimeout, "leadership", n.IsLeader)
	err := n.RemoveMember(membershipCtx(t), 4)
	if !errors.Is(err, ErrLastVoter) || !strings.Contains(err.Error(), "broker 4 is the last voter") {
		t.Fatalf("RemoveMember(last voter) = %v, want ErrLastVoter", err)
	}
	if got := memberIDs(t, n); got != "4" {
		t.Fatalf("members %s after a refused removal", got)
	}
}

// TestSidecarMembershipAPI runs AddSidecar, RemoveSidecar and
// DescribeSidecars through the admin endpoints of three sidecars.
func TestSidecarMembershipAPI(t *testing.T) {
	c := newSidecarCluster(t, 1, 2, 3)
	leader := c.waitLeader()
	fid, _ := follower(t, c.running(), leader)

	describe := func(at int32) *protocol.DescribeSidecarsResponse {
		t.Helper()
		return c.do(at, &protocol.DescribeSidecarsRequest{}).(*protocol.DescribeSidecarsResponse)
	}
	waitFor(t, clusterTimeout, "three registered sidecars", func() bool {
		d := describe(fid)
		if d.LeaderId != leader || len(d.Sidecars) != 3 {
			return false
		}
		for _, s := range d.Sidecars {
			if s.AdminAddress == nil || *s.AdminAddress != c.adminOf(s.BrokerId) || s.RaftAddress != raftAddr(s.BrokerId) || !s.Voter || s.Version != "test" {
				return false
			}
		}
		return true
	})

	// A follower answers NOT_CONTROLLER with the leader's admin address.
	add := &protocol.AddSidecarRequest{BrokerId: 3, RaftAddress: raftAddr(3), AdminAddress: c.adminOf(3)}
	resp := c.do(fid, add).(*protocol.AddSidecarResponse)
	wantCode(t, "AddSidecar on a follower", resp.ErrorCode, resp.ErrorMessage, kerr.NotController.Code)
	if resp.LeaderAdminAddress == nil || *resp.LeaderAdminAddress != c.adminOf(leader) {
		t.Fatalf("LeaderAdminAddress = %v, want %s", resp.LeaderAdminAddress, c.adminOf(leader))
	}
	rresp := c.do(fid, &protocol.RemoveSidecarRequest{BrokerId: 3}).(*protocol.RemoveSidecarResponse)
	if rresp.ErrorCode != kerr.NotController.Code || deref(rresp.LeaderAdminAddress) != c.adminOf(leader) {
		t.Fatalf("RemoveSidecar on a follower = %v, leader %v", protocol.ErrorFor(rresp.ErrorCode, rresp.ErrorMessage), rresp.LeaderAdminAddress)
	}

	// Adding a member again at its address is a no-op.
	resp = c.do(leader, add).(*protocol.AddSidecarResponse)
	wantCode(t, "AddSidecar of a member", resp.ErrorCode, resp.ErrorMessage, 0)

	// Unknown IDs and bad addresses are refused with a clear message.
	rresp = c.do(leader, &protocol.RemoveSidecarRequest{BrokerId: 8}).(*protocol.RemoveSidecarResponse)
	wantCode(t, "RemoveSidecar of an unknown ID", rresp.ErrorCode, rresp.ErrorMessage, kerr.BrokerIDNotRegistered.Code,
		"broker 8 is not in the raft group (members: 1, 2, 3)")
	resp = c.do(leader, &protocol.AddSidecarRequest{BrokerId: 8, RaftAddress: "h:1", AdminAddress: "nohost"}).(*protocol.AddSidecarResponse)
	wantCode(t, "AddSidecar with a bad admin address", resp.ErrorCode, resp.ErrorMessage, kerr.InvalidRequest.Code,
		`admin address "nohost" of broker 8 is not host:port`)

	// Remove a follower: it leaves the configuration and the registry.
	other := int32(6) - leader - fid // the third sidecar
	rresp = c.do(leader, &protocol.RemoveSidecarRequest{BrokerId: other}).(*protocol.RemoveSidecarResponse)
	wantCode(t, "RemoveSidecar of a follower", rresp.ErrorCode, rresp.ErrorMessage, 0)
	for _, id := range []int32{leader, fid} {
		n := c.running()[id]
		waitFor(t, clusterTimeout, "the removal on every remaining node", func() bool {
			registered := true
			n.FSM().Read(func(s *State) { registered = s.Sidecars[other] != nil })
			return !registered && !hasMember(t, n, other)
		})
	}
	if d := describe(fid); len(d.Sidecars) != 2 {
		t.Fatalf("DescribeSidecars after the removal lists %+v", d.Sidecars)
	}

	// Add it back: it is a voter again, registered, and catches up.
	resp = c.do(leader, &protocol.AddSidecarRequest{BrokerId: other, RaftAddress: raftAddr(other), AdminAddress: c.adminOf(other)}).(*protocol.AddSidecarResponse)
	wantCode(t, "AddSidecar of the removed sidecar", resp.ErrorCode, resp.ErrorMessage, 0)
	applyOK(t, c.running()[leader], CreateMirror{Name: "after-rejoin", Config: bootstrapConfig()})
	c.waitAll("the mirror created after the rejoin", func(s *State) bool {
		sc := s.Sidecars[other]
		return s.Mirrors["after-rejoin"] != nil && sc != nil && sc.AdminAddr == c.adminOf(other)
	})
	if got := memberIDs(t, c.running()[other]); got != "1,2,3" {
		t.Fatalf("the rejoined sidecar sees members %s", got)
	}

	// The leader asked to remove itself hands over, and the new leader
	// removes it.
	rresp = c.do(leader, &protocol.RemoveSidecarRequest{BrokerId: leader}).(*protocol.RemoveSidecarResponse)
	wantCode(t, "RemoveSidecar of the leader", rresp.ErrorCode, rresp.ErrorMessage, 0)
	newLeader := int32(-1)
	waitFor(t, clusterTimeout, "a new leader without the old one", func() bool {
		for id, n := range c.running() {
			if id != leader && n.IsLeader() {
				newLeader = id
			}
		}
		return newLeader >= 0 && !hasMember(t, c.running()[newLeader], leader)
	})
	want := []protocol.DescribedSidecar{}
	for _, id := range []int32{1, 2, 3} {
		version := "test"
		if id == other { // registered by AddSidecar, which does not know its version, unless it led since
			version = "?"
		}
		if id != leader {
			want = append(want, protocol.DescribedSidecar{BrokerId: id, RaftAddress: raftAddr(id), AdminAddress: strPtr(c.adminOf(id)), Voter: true, Version: version})
		}
	}
	var last *protocol.DescribeSidecarsResponse
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("last DescribeSidecars from %d: leader %d, %+v", newLeader, last.LeaderId, last.Sidecars)
		}
	})
	waitFor(t, clusterTimeout, "the old leader's registration to go", func() bool {
		last = describe(newLeader)
		for i, sc := range last.Sidecars {
			if sc.BrokerId == other && (sc.Version == "" || sc.Version == "test") {
				last.Sidecars[i].Version = "?"
			}
		}
		return last.LeaderId == newLeader && reflect.DeepEqual(last.Sidecars, want)
	})
	// The old leader's raft still runs, so it can be added back.
	resp = c.do(newLeader, &protocol.AddSidecarRequest{BrokerId: leader, RaftAddress: raftAddr(leader), AdminAddress: c.adminOf(leader)}).(*protocol.AddSidecarResponse)
	wantCode(t, "AddSidecar of the old leader", resp.ErrorCode, resp.ErrorMessage, 0)
	applyOK(t, c.running()[newLeader], DeleteMirror{Name: "after-rejoin"})
	c.waitAll("the deletion on every node, the old leader included", func(s *State) bool { return s.Mirrors["after-rejoin"] == nil })
}

func TestMembershipCommands(t *testing.T) {
	s := fixtureState(t)
	mustApply(t, s, RemoveSidecar{ID: 1})
	if s.Sidecars[1] != nil {
		t.Fatal("RemoveSidecar kept the sidecar")
	}
	mustApply(t, s, RemoveSidecar{ID: 1}) // idempotent
	if res := applyCommand(s, mustEncode(t, RemoveSidecar{ID: -1})); res.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("RemoveSidecar(-1) = %+v", res)
	}
}
