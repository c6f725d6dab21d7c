package raftnode

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/protocol"
)

// PeerGuard wraps the admin endpoint's handler for peer security: a
// command forwarded with ApplyCommand by an authenticated peer
// (ConnInfo.Peer) may register only that peer, so that no sidecar can
// overwrite another's admin address and have commands, source credentials
// included, forwarded to it. Which connections reach the internal APIs at
// all is the protocol server's PeerAPIsOnly.
func PeerGuard(next protocol.Handler, log *zap.Logger) protocol.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return protocol.HandlerFunc(func(ctx context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response {
		r, ok := req.(*protocol.ApplyCommandRequest)
		if !ok || c.Peer == nil {
			return next.Handle(ctx, c, req)
		}
		cmd, err := fsm.DecodeCommand(r.Command)
		if err != nil {
			return next.Handle(ctx, c, req) // ApplyLocal answers with the decode error
		}
		if reg, ok := cmd.(fsm.RegisterSidecar); ok && reg.ID != c.Peer.BrokerID {
			msg := fmt.Sprintf("broker %d may register only itself, not broker %d", c.Peer.BrokerID, reg.ID)
			log.Warn("refused a RegisterSidecar for another broker", zap.Int32("peer-broker-id", c.Peer.BrokerID),
				zap.Int32("registered-id", reg.ID), zap.String("admin-address", reg.AdminAddr),
				zap.Stringer("remote-addr", c.RemoteAddr))
			return &protocol.ApplyCommandResponse{ErrorCode: kerr.ClusterAuthorizationFailed.Code, ErrorMessage: &msg}
		}
		return next.Handle(ctx, c, req)
	})
}
