package coordinator

import (
	"fmt"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/internal/acl"
	"github.com/sidemirror/sidemirror/protocol"
)

// Authorization is the admin endpoint's access control (DESIGN D15): once
// Enabled (admin.security.protocol is not PLAINTEXT), every request is
// checked against the ACLs in the raft state (fsm.State.AdminACLs) with
// KIP-1279's CLUSTER_MIRROR resource and Kafka's CLUSTER resource for the
// raft membership, and whatever no ALLOW grants is denied. SuperUsers
// (admin.super.users) may do everything.
type Authorization struct {
	Enabled    bool
	SuperUsers []string
}

// authorizer decides one request's access. It is built per request from
// the state the request reads, so that a decision and the operation see
// the same ACLs.
type authorizer struct {
	cfg       Authorization
	principal string
	// peer is set for a request from a sidecar of the raft group,
	// authenticated by the peer listener's mutual TLS (ConnInfo.Peer): it
	// passes on what a client asked that sidecar, authorized there, and can
	// forward raft commands anyway, so it is allowed everything.
	peer bool
	host string
	acls []acl.Binding
}

// newAuthorizer returns the authorizer for a request from c.
func (a *admin) newAuthorizer(c *protocol.ConnInfo) authorizer {
	z := authorizer{cfg: a.authz, principal: protocol.Anonymous, host: acl.Wildcard}
	if c != nil {
		if c.Principal != "" {
			z.principal = c.Principal
		}
		z.peer = c.Peer != nil
		if c.RemoteAddr != nil {
			if host, _, err := net.SplitHostPort(c.RemoteAddr.String()); err == nil {
				z.host = host
			}
		}
	}
	if z.cfg.Enabled {
		z.acls = a.ctl.State().AdminACLs
	}
	return z
}

// allowed reports whether the caller may do op on the resource.
func (z authorizer) allowed(op acl.Operation, resourceType int8, name string) bool {
	if !z.cfg.Enabled || z.peer {
		return true
	}
	return acl.Authorize(acl.Request{Principal: z.principal, Host: z.host, Operation: op,
		ResourceType: resourceType, ResourceName: name}, z.acls, z.cfg.SuperUsers)
}

func (z authorizer) mirror(op acl.Operation, mirror string) bool {
	return z.allowed(op, acl.ResourceClusterMirror, mirror)
}

// deniedMessage says what the caller lacks.
func (z authorizer) deniedMessage(op acl.Operation, resourceType int8, name string) string {
	return fmt.Sprintf("principal %s is not authorized to %s %s %s; an ACL such as kafka-cluster-mirrors --add-acl --allow-principal %s --operation %s %s grants it",
		z.principal, op, acl.ResourceName(resourceType), name, z.principal, op, aclFlagFor(resourceType, name))
}

func aclFlagFor(resourceType int8, name string) string {
	if resourceType == acl.ResourceCluster {
		return "--cluster"
	}
	return "--cluster-mirror " + name
}

// authorizedOps are the operations reported in DescribeClusterMirrors'
// AuthorizedOperations bitfield (bit n for Kafka's operation code n).
var authorizedOps = []acl.Operation{acl.OpCreate, acl.OpDelete, acl.OpAlter, acl.OpDescribe, acl.OpDescribeConfigs, acl.OpAlterConfigs}

func (z authorizer) mirrorOps(mirror string) int32 {
	var bits int32
	for _, op := range authorizedOps {
		if z.mirror(op, mirror) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// authorize checks req before it is handled. It returns the error response
// when the whole request is denied; nil lets it through (requests about
// several mirrors are filtered by filterRequest and filterResponse).
func (a *admin) authorize(z authorizer, req protocol.Request) protocol.Response {
	check := func(op acl.Operation, resourceType int8, name string) protocol.Response {
		if z.allowed(op, resourceType, name) {
			return nil
		}
		a.log.Info("admin request denied", zap.String("principal", z.principal), zap.String("host", z.host),
			zap.String("api", protocol.KeyName(req.Key())), zap.String("resource", acl.ResourceName(resourceType)+":"+name),
			zap.String("operation", op.String()))
		resp := req.ResponseKind()
		setError(req, resp, kerr.ClusterAuthorizationFailed.Code, z.deniedMessage(op, resourceType, name))
		return resp
	}
	switch r := req.(type) {
	case *protocol.CreateClusterMirrorRequest:
		return check(acl.OpCreate, acl.ResourceClusterMirror, r.MirrorName)
	case *protocol.DeleteClusterMirrorRequest:
		return check(acl.OpDelete, acl.ResourceClusterMirror, r.MirrorName)
	case *protocol.StartMirrorTopicsRequest:
		return check(acl.OpAlter, acl.ResourceClusterMirror, r.MirrorName)
	case *protocol.StopMirrorTopicsRequest:
		return check(acl.OpAlter, acl.ResourceClusterMirror, r.MirrorName)
	case *protocol.PauseMirrorTopicsRequest:
		return check(acl.OpAlter, acl.ResourceClusterMirror, r.MirrorName)
	case *protocol.ResumeMirrorTopicsRequest:
		return check(acl.OpAlter, acl.ResourceClusterMirror, r.MirrorName)
	case *protocol.RecoverMirrorTopicsRequest:
		return check(acl.OpAlter, acl.ResourceClusterMirror, r.MirrorName)
	case *protocol.AddSidecarRequest, *protocol.RemoveSidecarRequest:
		return check(acl.OpAlter, acl.ResourceCluster, acl.ClusterName)
	case *protocol.DescribeSidecarsRequest:
		return check(acl.OpDescribe, acl.ResourceCluster, acl.ClusterName)
	case *protocol.CreateAclsRequest, *protocol.DeleteAclsRequest:
		return check(acl.OpAlter, acl.ResourceCluster, acl.ClusterName)
	case *protocol.DescribeAclsRequest:
		return check(acl.OpDescribe, acl.ResourceCluster, acl.ClusterName)
	case *protocol.ListClusterMirrorsRequest, *protocol.DescribeClusterMirrorsRequest,
		*protocol.DescribeConfigsRequest, *protocol.IncrementalAlterConfigsRequest:
		return nil // per mirror or resource: filterRequest, filterResponse
	case *protocol.ApplyCommandRequest, *protocol.ReadMirrorStatesRequest, *protocol.WriteMirrorStatesRequest,
		*protocol.DescribeLocalPartitionsRequest:
		return nil // internal: served to peers only, on the peer listener
	}
	// An API without a rule above is denied once security is on, so that a
	// new one is never served unauthorized by default.
	return check(acl.OpAll, acl.ResourceCluster, acl.ClusterName)
}

// configACLResource returns the ACL resource that guards a config
// resource: a mirror's CLUSTER_MIRROR; for the throttle configs of BROKER
// and TOPIC resources the CLUSTER, as Kafka guards broker configs
// (ALTER_CONFIGS, DESCRIBE_CONFIGS on CLUSTER). checked is false for the
// types the endpoint does not serve (the handler refuses them).
func configACLResource(resourceType int8, name string) (aclType int8, aclName string, checked bool) {
	switch resourceType {
	case protocol.ResourceTypeClusterMirror:
		return acl.ResourceClusterMirror, name, true
	case protocol.ResourceTypeBroker, protocol.ResourceTypeTopic:
		return acl.ResourceCluster, acl.ClusterName, true
	}
	return 0, "", false
}

// authorizeAlterConfigs splits an IncrementalAlterConfigs request's
// resources into those the caller may alter (ALTER_CONFIGS) and the denied
// ones, answered with CLUSTER_AUTHORIZATION_FAILED; handle handles the
// allowed ones and the answers are merged in request order.
func (a *admin) authorizeAlterConfigs(z authorizer, r *protocol.IncrementalAlterConfigsRequest,
	handle func(*protocol.IncrementalAlterConfigsRequest) protocol.Response) protocol.Response {
	allowed, denied := splitDenied(r.Resources, func(res protocol.AlterConfigsResource) (protocol.AlterConfigsResourceResponse, bool) {
		rt, name, checked := configACLResource(res.ResourceType, res.ResourceName)
		if !checked || z.allowed(acl.OpAlterConfigs, rt, name) {
			return protocol.AlterConfigsResourceResponse{}, false
		}
		return protocol.AlterConfigsResourceResponse{ResourceType: res.ResourceType, ResourceName: res.ResourceName,
			ErrorCode: kerr.ClusterAuthorizationFailed.Code, ErrorMessage: strPtr(z.deniedMessage(acl.OpAlterConfigs, rt, name))}, true
	})
	if len(denied) == 0 {
		return handle(r)
	}
	var answered []protocol.AlterConfigsResourceResponse
	if len(allowed) > 0 {
		req := *r
		req.Resources = allowed
		answered = handle(&req).(*protocol.IncrementalAlterConfigsResponse).Responses
	}
	return &protocol.IncrementalAlterConfigsResponse{Responses: mergeDenied(len(r.Resources), denied, answered)}
}

// authorizeDescribeConfigs does for DescribeConfigs what
// authorizeAlterConfigs does for IncrementalAlterConfigs, with
// DESCRIBE_CONFIGS.
func (a *admin) authorizeDescribeConfigs(z authorizer, r *protocol.DescribeConfigsRequest,
	handle func(*protocol.DescribeConfigsRequest) protocol.Response) protocol.Response {
	allowed, denied := splitDenied(r.Resources, func(res protocol.DescribeConfigsResource) (protocol.DescribeConfigsResult, bool) {
		rt, name, checked := configACLResource(res.ResourceType, res.ResourceName)
		if !checked || z.allowed(acl.OpDescribeConfigs, rt, name) {
			return protocol.DescribeConfigsResult{}, false
		}
		return protocol.DescribeConfigsResult{ResourceType: res.ResourceType, ResourceName: res.ResourceName,
			ErrorCode: kerr.ClusterAuthorizationFailed.Code, ErrorMessage: strPtr(z.deniedMessage(acl.OpDescribeConfigs, rt, name))}, true
	})
	if len(denied) == 0 {
		return handle(r)
	}
	var answered []protocol.DescribeConfigsResult
	if len(allowed) > 0 {
		req := *r
		req.Resources = allowed
		answered = handle(&req).(*protocol.DescribeConfigsResponse).Results
	}
	return &protocol.DescribeConfigsResponse{Results: mergeDenied(len(r.Resources), denied, answered)}
}

// splitDenied returns the resources deny lets through, in order, and the
// answers of those it denies, by their index in resources.
func splitDenied[R, A any](resources []R, deny func(R) (A, bool)) (allowed []R, denied map[int]A) {
	denied = map[int]A{}
	for i, res := range resources {
		if d, ok := deny(res); ok {
			denied[i] = d
			continue
		}
		allowed = append(allowed, res)
	}
	return allowed, denied
}

// mergeDenied answers n resources in request order: a denied one with its
// denial, the others with the next of answered (the allowed ones' answers).
func mergeDenied[A any](n int, denied map[int]A, answered []A) []A {
	var out []A
	for i := range n {
		if d, ok := denied[i]; ok {
			out = append(out, d)
		} else if len(answered) > 0 {
			out = append(out, answered[0])
			answered = answered[1:]
		}
	}
	return out
}

// filterList keeps the mirrors the caller may describe (KIP-1279: List
// returns only the mirrors the caller is authorized for).
func filterList(z authorizer, resp *protocol.ListClusterMirrorsResponse) {
	resp.Mirrors = slices.DeleteFunc(resp.Mirrors, func(m protocol.ListedMirror) bool {
		return !z.mirror(acl.OpDescribe, m.MirrorName)
	})
}

// authorizeDescribe answers DescribeClusterMirrors for the mirrors the
// caller may describe: a mirror named in the request that the caller may
// not describe gets CLUSTER_AUTHORIZATION_FAILED (and none of its details),
// one not named (a request for all mirrors) is left out.
func (a *admin) authorizeDescribe(z authorizer, r *protocol.DescribeClusterMirrorsRequest,
	handle func(*protocol.DescribeClusterMirrorsRequest) protocol.Response) protocol.Response {
	if !z.cfg.Enabled {
		return handle(r)
	}
	all := len(r.MirrorNames) == 0
	allowed := *r
	allowed.MirrorNames = nil
	denied := map[string]bool{}
	names := r.MirrorNames
	if all {
		names = a.ctl.State().MirrorNames()
	}
	for _, n := range names {
		if z.mirror(acl.OpDescribe, n) {
			allowed.MirrorNames = append(allowed.MirrorNames, n)
		} else {
			denied[n] = true
		}
	}
	out := &protocol.DescribeClusterMirrorsResponse{}
	var answered []protocol.DescribedMirror
	if len(allowed.MirrorNames) > 0 {
		answered = handle(&allowed).(*protocol.DescribeClusterMirrorsResponse).Mirrors
	}
	byName := map[string]protocol.DescribedMirror{}
	for _, m := range answered {
		if r.IncludeAuthorizedOperations {
			m.AuthorizedOperations = z.mirrorOps(m.MirrorName)
		}
		byName[m.MirrorName] = m
	}
	for _, n := range names {
		if m, ok := byName[n]; ok {
			out.Mirrors = append(out.Mirrors, m)
			continue
		}
		if denied[n] && !all {
			var dm protocol.DescribedMirror
			dm.Default()
			dm.MirrorName = n
			dm.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			dm.ErrorMessage = strPtr(z.deniedMessage(acl.OpDescribe, acl.ResourceClusterMirror, n))
			out.Mirrors = append(out.Mirrors, dm)
		}
	}
	return out
}
