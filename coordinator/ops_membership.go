package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file holds the admin handlers of the raft membership: AddSidecar,
// RemoveSidecar and DescribeSidecars. Membership changes run on the raft
// leader only; another sidecar answers NOT_CONTROLLER with the leader's
// admin address, and the client asks there (the CLI follows once).

// addSidecar handles AddSidecar: it adds the sidecar to the raft group (see
// Node.AddMember for the rules) and registers its addresses in the state,
// so that it can be reached before it registers itself.
func (a *admin) addSidecar(ctx context.Context, r *protocol.AddSidecarRequest) protocol.Response {
	resp := &protocol.AddSidecarResponse{}
	set := func(code int16, msg string, leader *string) protocol.Response {
		resp.ErrorCode, resp.ErrorMessage, resp.LeaderAdminAddress = code, strPtr(msg), leader
		return resp
	}
	if p := raftnode.HostPortProblem(r.AdminAddress); p != "" {
		return set(kerr.InvalidRequest.Code, fmt.Sprintf("admin address %q of broker %d %s", r.AdminAddress, r.BrokerId, p), nil)
	}
	added, err := a.node.AddMember(ctx, r.BrokerId, r.RaftAddress)
	if err != nil {
		code, leader := membershipError(err)
		return set(code, err.Error(), leader)
	}
	version := ""
	if sc := a.ctl.State().Sidecars[r.BrokerId]; sc != nil && sc.RaftAddr == r.RaftAddress {
		version = sc.Version
	}
	if _, err := applyChecked(ctx, a.ctl, fsm.RegisterSidecar{ID: r.BrokerId, RaftAddr: r.RaftAddress, AdminAddr: r.AdminAddress, Version: version}); err != nil {
		return set(kerr.UnknownServerError.Code, fmt.Sprintf("broker %d is in the raft group, but registering its admin address %s failed: %v; run --add-sidecar again",
			r.BrokerId, r.AdminAddress, err), nil)
	}
	a.log.Info("sidecar added through the admin endpoint", zap.Int32("member-id", r.BrokerId), zap.Bool("changed", added),
		zap.String("raft-address", r.RaftAddress), zap.String("admin-address", r.AdminAddress))
	return resp
}

// removeSidecar handles RemoveSidecar: it removes the sidecar from the raft
// group (see Node.RemoveMember) and forgets its registration. When the
// leader is asked to remove itself, it hands leadership over and passes the
// request on to the new leader.
func (a *admin) removeSidecar(ctx context.Context, r *protocol.RemoveSidecarRequest) protocol.Response {
	resp := &protocol.RemoveSidecarResponse{}
	set := func(code int16, msg string, leader *string) protocol.Response {
		resp.ErrorCode, resp.ErrorMessage, resp.LeaderAdminAddress = code, strPtr(msg), leader
		return resp
	}
	wasLeader := a.node.IsLeader()
	err := a.node.RemoveMember(ctx, r.BrokerId)
	var nle *raftnode.NotLeaderError
	if errors.As(err, &nle) && wasLeader && r.BrokerId == a.brokerID && nle.LeaderAdminAddr != "" {
		// This sidecar led and handed over so as not to remove itself:
		// the new leader removes it.
		out, ferr := a.peers.Do(ctx, nle.LeaderAdminAddr, &protocol.RemoveSidecarRequest{BrokerId: r.BrokerId})
		if ferr == nil {
			fwd := out.(*protocol.RemoveSidecarResponse)
			fwd.ThrottleTimeMs = 0
			return fwd
		}
		a.log.Warn("passing the removal of this sidecar on to the new raft leader failed", zap.String("leader-admin-address", nle.LeaderAdminAddr), zap.Error(ferr))
	}
	if err != nil {
		code, leader := membershipError(err)
		return set(code, err.Error(), leader)
	}
	if _, err := applyChecked(ctx, a.ctl, fsm.RemoveSidecar{ID: r.BrokerId}); err != nil {
		return set(kerr.UnknownServerError.Code, fmt.Sprintf("broker %d left the raft group, but forgetting its registration failed: %v", r.BrokerId, err), nil)
	}
	a.log.Info("sidecar removed through the admin endpoint", zap.Int32("member-id", r.BrokerId))
	return resp
}

// membershipError maps an error of AddMember or RemoveMember to a Kafka
// error code and, for NOT_CONTROLLER, the leader's admin address.
func membershipError(err error) (int16, *string) {
	var nle *raftnode.NotLeaderError
	switch {
	case errors.As(err, &nle):
		if nle.LeaderAdminAddr != "" {
			return kerr.NotController.Code, strPtr(nle.LeaderAdminAddr)
		}
		return kerr.NotController.Code, nil
	case errors.Is(err, raftnode.ErrUnknownMember):
		return kerr.BrokerIDNotRegistered.Code, nil
	case errors.Is(err, raftnode.ErrLastVoter), errors.Is(err, raftnode.ErrInvalidMember):
		return kerr.InvalidRequest.Code, nil
	}
	return kerr.UnknownServerError.Code, nil
}

// describeSidecars handles DescribeSidecars from this sidecar's view of the
// raft configuration and the registered addresses.
func (a *admin) describeSidecars(*protocol.DescribeSidecarsRequest) protocol.Response {
	resp := &protocol.DescribeSidecarsResponse{LeaderId: -1}
	members, err := a.node.Members()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strPtr(err.Error())
		return resp
	}
	resp.LeaderId, _ = a.node.Leader()
	st := a.ctl.State()
	for _, m := range members {
		d := protocol.DescribedSidecar{BrokerId: m.ID, RaftAddress: m.Address, Voter: m.Voter}
		if sc := st.Sidecars[m.ID]; sc != nil {
			if sc.AdminAddr != "" {
				d.AdminAddress = strPtr(sc.AdminAddr)
			}
			d.Version = sc.Version
		}
		resp.Sidecars = append(resp.Sidecars, d)
	}
	return resp
}
