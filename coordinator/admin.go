package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/raftnode"
	"github.com/sidemirror/sidemirror/protocol"
)

// raftMember is what the admin operations need of this sidecar's raft
// member besides the controller: catching up before answering, applying
// forwarded commands, and the membership operations (*raftnode.Node).
type raftMember interface {
	WaitCaughtUp(ctx context.Context) error
	ApplyLocal(ctx context.Context, cmd []byte) (fsm.Result, error)
	Members() ([]raftnode.Member, error)
	AddMember(ctx context.Context, id int32, addr string) (bool, error)
	RemoveMember(ctx context.Context, id int32) error
	Leader() (int32, string)
	IsLeader() bool
}

// localPartitions is what the admin operations need of the reconciler:
// the rows of the partitions this sidecar drives, and a nudge after a
// change.
type localPartitions interface {
	LocalRows(mirrors []string) []protocol.DescribedMirror
	Kick()
}

// admin is the admin operations of the admin endpoint (KIP-1279 §5, DESIGN
// D11, D16): mirrors, their topics and configs, describe, the raft
// membership, and the internal APIs. It has no state of its own: what an
// operation changes goes through raft, the destination or __mirror_state,
// so requests run concurrently, each on its connection's goroutine.
type admin struct {
	brokerID int32
	ctl      controller
	node     raftMember
	local    localPartitions
	writer   *stateWriter
	coord    *stateCoordinator // nil without __mirror_state
	peers    peerClient
	dest     *Destination
	destCl   *kgo.Client
	dial     SourceDialer
	authz    Authorization
	timeout  time.Duration // bounds one operation (RequestTimeout)
	now      func() time.Time
	log      *zap.Logger
}

// handle answers one request of the admin endpoint (Service.Handle) from
// the connection c: the internal APIs as they are, every other request
// once this sidecar's state caught up with the raft group and its
// principal (c.Principal) is authorized for it (authz.go, DESIGN D15).
func (a *admin) handle(ctx context.Context, c *protocol.ConnInfo, req protocol.Request) protocol.Response {
	ctx, cancel := context.WithTimeout(withEndpoint(ctx), a.timeout)
	defer cancel()
	if _, internal := req.(*protocol.ApplyCommandRequest); !internal {
		wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
		err := a.node.WaitCaughtUp(wctx)
		wcancel()
		if err != nil {
			resp := req.ResponseKind()
			setError(req, resp, kerr.CoordinatorNotAvailable.Code, err.Error())
			return resp
		}
	}
	z := a.newAuthorizer(c)
	if denied := a.authorize(z, req); denied != nil {
		return denied
	}
	switch r := req.(type) {
	case *protocol.ApplyCommandRequest:
		return a.applyCommand(ctx, r)
	case *protocol.CreateClusterMirrorRequest:
		return a.createMirror(ctx, r)
	case *protocol.ListClusterMirrorsRequest:
		resp := a.listMirrors(r).(*protocol.ListClusterMirrorsResponse)
		filterList(z, resp)
		return resp
	case *protocol.DescribeClusterMirrorsRequest:
		return a.authorizeDescribe(z, r, func(r *protocol.DescribeClusterMirrorsRequest) protocol.Response { return a.describeMirrors(ctx, r) })
	case *protocol.DescribeLocalPartitionsRequest:
		return a.describeLocal(r)
	case *protocol.StartMirrorTopicsRequest:
		return a.startTopics(ctx, r)
	case *protocol.StopMirrorTopicsRequest:
		return a.stopTopics(ctx, r)
	case *protocol.PauseMirrorTopicsRequest:
		return a.pauseTopics(ctx, r)
	case *protocol.ResumeMirrorTopicsRequest:
		return a.resumeTopics(ctx, r)
	case *protocol.RecoverMirrorTopicsRequest:
		return a.recoverTopics(ctx, r)
	case *protocol.DeleteClusterMirrorRequest:
		return a.deleteMirror(ctx, r)
	case *protocol.IncrementalAlterConfigsRequest:
		return a.authorizeAlterConfigs(z, r, func(r *protocol.IncrementalAlterConfigsRequest) protocol.Response {
			return a.incrementalAlterConfigs(ctx, r)
		})
	case *protocol.DescribeConfigsRequest:
		return a.authorizeDescribeConfigs(z, r, a.describeConfigs)
	case *protocol.CreateAclsRequest:
		return a.createAcls(ctx, r)
	case *protocol.DescribeAclsRequest:
		return a.describeAcls(r)
	case *protocol.DeleteAclsRequest:
		return a.deleteAcls(ctx, r)
	case *protocol.AddSidecarRequest:
		return a.addSidecar(ctx, r)
	case *protocol.RemoveSidecarRequest:
		return a.removeSidecar(ctx, r)
	case *protocol.DescribeSidecarsRequest:
		return a.describeSidecars(r)
	case *protocol.ReadMirrorStatesRequest:
		if a.coord == nil {
			break
		}
		return a.coord.read(r)
	case *protocol.WriteMirrorStatesRequest:
		if a.coord == nil {
			break
		}
		return a.coord.write(ctx, r, a.now().UnixMilli())
	}
	resp := req.ResponseKind()
	setError(req, resp, kerr.UnsupportedVersion.Code, fmt.Sprintf("%s is not supported by this sidecar yet", protocol.KeyName(req.Key())))
	return resp
}

// applyCommand applies a command forwarded by a follower sidecar.
func (a *admin) applyCommand(ctx context.Context, r *protocol.ApplyCommandRequest) protocol.Response {
	resp := &protocol.ApplyCommandResponse{}
	res, err := a.node.ApplyLocal(ctx, r.Command)
	if err != nil {
		code := kerr.UnknownServerError.Code
		if errors.Is(err, raftnode.ErrNotLeader) {
			code = kerr.NotController.Code
		}
		resp.ErrorCode, resp.ErrorMessage = code, strPtr(err.Error())
		return resp
	}
	b, err := json.Marshal(res)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strPtr(err.Error())
		return resp
	}
	resp.Result = b
	return resp
}

// setError sets the error of the response resp to request req: its
// top-level error, or for the config APIs, which have none, the error of
// every resource the request names. Every response kind of the admin
// endpoint has its case (TestNotCaughtUpIsAnError sends each), so that no
// failed request is answered as a success.
func setError(req protocol.Request, resp protocol.Response, code int16, msg string) {
	m := strPtr(msg)
	switch r := resp.(type) {
	case *protocol.AddSidecarResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.RemoveSidecarResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DescribeSidecarsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.IncrementalAlterConfigsResponse:
		if q, ok := req.(*protocol.IncrementalAlterConfigsRequest); ok {
			for _, res := range q.Resources {
				r.Responses = append(r.Responses, protocol.AlterConfigsResourceResponse{ErrorCode: code, ErrorMessage: m,
					ResourceType: res.ResourceType, ResourceName: res.ResourceName})
			}
		}
	case *protocol.DescribeConfigsResponse:
		if q, ok := req.(*protocol.DescribeConfigsRequest); ok {
			for _, res := range q.Resources {
				r.Results = append(r.Results, protocol.DescribeConfigsResult{ErrorCode: code, ErrorMessage: m,
					ResourceType: res.ResourceType, ResourceName: res.ResourceName})
			}
		}
	case *protocol.CreateClusterMirrorResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DeleteClusterMirrorResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ListClusterMirrorsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DescribeClusterMirrorsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.StartMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.StopMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.PauseMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ResumeMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.RecoverMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ReadMirrorStatesResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.WriteMirrorStatesResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.ApplyCommandResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DescribeLocalPartitionsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.DescribeAclsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *protocol.CreateAclsResponse:
		if q, ok := req.(*protocol.CreateAclsRequest); ok {
			for range q.Creations {
				r.Results = append(r.Results, kmsg.CreateACLsResponseResult{ErrorCode: code, ErrorMessage: m})
			}
		}
	case *protocol.DeleteAclsResponse:
		if q, ok := req.(*protocol.DeleteAclsRequest); ok {
			for range q.Filters {
				r.Results = append(r.Results, kmsg.DeleteACLsResponseResult{ErrorCode: code, ErrorMessage: m})
			}
		}
	}
}

func strPtr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
