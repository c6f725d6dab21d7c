package coordinator

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/coordinator/raftnode/raftnodetest"
	"github.com/sidemirror/sidemirror/internal/testwait"
	"github.com/sidemirror/sidemirror/protocol"
)

// TestSidecarMembershipAPI runs AddSidecar, RemoveSidecar and
// DescribeSidecars through the admin endpoints of three sidecars.
func TestSidecarMembershipAPI(t *testing.T) {
	c := newSidecarCluster(t, 1, 2, 3)
	leader := c.waitLeader()
	fid, _ := raftnodetest.Follower(t, c.Running(), leader)

	describe := func(at int32) *protocol.DescribeSidecarsResponse {
		t.Helper()
		return c.do(at, &protocol.DescribeSidecarsRequest{}).(*protocol.DescribeSidecarsResponse)
	}
	testwait.For(t, raftnodetest.Timeout, "three registered sidecars", func() bool {
		d := describe(fid)
		if d.LeaderId != leader || len(d.Sidecars) != 3 {
			return false
		}
		for _, s := range d.Sidecars {
			if s.AdminAddress == nil || *s.AdminAddress != c.adminOf(s.BrokerId) || s.RaftAddress != raftnodetest.RaftAddr(s.BrokerId) || !s.Voter || s.Version != "test" {
				return false
			}
		}
		return true
	})

	// A follower answers NOT_CONTROLLER with the leader's admin address.
	add := &protocol.AddSidecarRequest{BrokerId: 3, RaftAddress: raftnodetest.RaftAddr(3), AdminAddress: c.adminOf(3)}
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
		n := c.Running()[id]
		testwait.For(t, raftnodetest.Timeout, "the removal on every remaining node", func() bool {
			registered := true
			n.FSM().Read(func(s *fsm.State) { registered = s.Sidecars[other] != nil })
			return !registered && !hasMember(t, n, other)
		})
	}
	if d := describe(fid); len(d.Sidecars) != 2 {
		t.Fatalf("DescribeSidecars after the removal lists %+v", d.Sidecars)
	}

	// Add it back: it is a voter again, registered, and catches up.
	resp = c.do(leader, &protocol.AddSidecarRequest{BrokerId: other, RaftAddress: raftnodetest.RaftAddr(other), AdminAddress: c.adminOf(other)}).(*protocol.AddSidecarResponse)
	wantCode(t, "AddSidecar of the removed sidecar", resp.ErrorCode, resp.ErrorMessage, 0)
	raftnodetest.ApplyOK(t, c.Running()[leader], fsm.CreateMirror{Name: "after-rejoin", Config: fsmtest.BootstrapConfig()})
	c.WaitAll("the mirror created after the rejoin", func(s *fsm.State) bool {
		sc := s.Sidecars[other]
		return s.Mirrors["after-rejoin"] != nil && sc != nil && sc.AdminAddr == c.adminOf(other)
	})
	if got := memberIDs(t, c.Running()[other]); got != "1,2,3" {
		t.Fatalf("the rejoined sidecar sees members %s", got)
	}

	// The leader asked to remove itself hands over, and the new leader
	// removes it.
	rresp = c.do(leader, &protocol.RemoveSidecarRequest{BrokerId: leader}).(*protocol.RemoveSidecarResponse)
	wantCode(t, "RemoveSidecar of the leader", rresp.ErrorCode, rresp.ErrorMessage, 0)
	newLeader := int32(-1)
	testwait.For(t, raftnodetest.Timeout, "a new leader without the old one", func() bool {
		for id, n := range c.Running() {
			if id != leader && n.IsLeader() {
				newLeader = id
			}
		}
		return newLeader >= 0 && !hasMember(t, c.Running()[newLeader], leader)
	})
	want := []protocol.DescribedSidecar{}
	for _, id := range []int32{1, 2, 3} {
		version := "test"
		if id == other { // registered by AddSidecar, which does not know its version, unless it led since
			version = "?"
		}
		if id != leader {
			want = append(want, protocol.DescribedSidecar{BrokerId: id, RaftAddress: raftnodetest.RaftAddr(id), AdminAddress: strPtr(c.adminOf(id)), Voter: true, Version: version})
		}
	}
	var last *protocol.DescribeSidecarsResponse
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("last DescribeSidecars from %d: leader %d, %+v", newLeader, last.LeaderId, last.Sidecars)
		}
	})
	testwait.For(t, raftnodetest.Timeout, "the old leader's registration to go", func() bool {
		last = describe(newLeader)
		for i, sc := range last.Sidecars {
			if sc.BrokerId == other && (sc.Version == "" || sc.Version == "test") {
				last.Sidecars[i].Version = "?"
			}
		}
		return last.LeaderId == newLeader && reflect.DeepEqual(last.Sidecars, want)
	})
	// The old leader's raft still runs, so it can be added back.
	resp = c.do(newLeader, &protocol.AddSidecarRequest{BrokerId: leader, RaftAddress: raftnodetest.RaftAddr(leader), AdminAddress: c.adminOf(leader)}).(*protocol.AddSidecarResponse)
	wantCode(t, "AddSidecar of the old leader", resp.ErrorCode, resp.ErrorMessage, 0)
	raftnodetest.ApplyOK(t, c.Running()[newLeader], fsm.DeleteMirror{Name: "after-rejoin"})
	c.WaitAll("the deletion on every node, the old leader included", func(s *fsm.State) bool { return s.Mirrors["after-rejoin"] == nil })
}
