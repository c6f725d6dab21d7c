package coordinator

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/internal/acl"
	"github.com/sidemirror/sidemirror/protocol"
)

// The ACL APIs of the admin endpoint (DESIGN D15): Kafka's CreateAcls,
// DescribeAcls and DeleteAcls for KIP-1279's CLUSTER_MIRROR resource and
// the CLUSTER (the raft group's membership). The ACLs are kept in the raft
// state, so every sidecar decides alike.

// createAcls stores the valid creations with one command; each creation
// gets its own result.
func (a *admin) createAcls(ctx context.Context, r *protocol.CreateAclsRequest) protocol.Response {
	resp := r.ResponseKind().(*protocol.CreateAclsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	var valid []acl.Binding
	var validIdx []int
	for i, c := range r.Creations {
		b := acl.Binding{ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName, PatternType: int8(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		if err := b.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, strPtr(err.Error())
			continue
		}
		valid, validIdx = append(valid, b), append(validIdx, i)
	}
	if len(valid) == 0 {
		return resp
	}
	code, msg := int16(0), ""
	res, err := a.ctl.Apply(ctx, fsm.CreateAdminACLs{ACLs: valid})
	switch {
	case err != nil:
		code, msg = kerr.UnknownServerError.Code, err.Error()
	case res.ErrorCode != 0:
		code, msg = res.ErrorCode, res.ErrorMessage
	default:
		a.log.Info("created admin ACLs", zap.Int("count", len(valid)))
	}
	for _, i := range validIdx {
		if code != 0 {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, strPtr(msg)
		}
	}
	return resp
}

// aclFilter converts a DescribeAcls or DeleteAcls filter.
func aclFilter(resourceType kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	return acl.Filter{ResourceType: int8(resourceType), ResourceName: name, PatternType: int8(pattern), Principal: principal,
		Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm)}
}

// describeAcls lists the ACLs the filter selects, grouped by resource
// pattern in the order they were created.
func (a *admin) describeAcls(r *protocol.DescribeAclsRequest) protocol.Response {
	resp := r.ResponseKind().(*protocol.DescribeAclsResponse)
	f := aclFilter(r.ResourceType, r.ResourceName, r.ResourcePatternType, r.Principal, r.Host, r.Operation, r.PermissionType)
	type pattern struct {
		typ     int8
		name    string
		pattern int8
	}
	index := map[pattern]int{}
	for _, b := range a.ctl.State().AdminACLs {
		if !f.Matches(b) {
			continue
		}
		p := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := index[p]
		if !ok {
			i = len(resp.Resources)
			index[p] = i
			resp.Resources = append(resp.Resources, kmsg.DescribeACLsResponseResource{ResourceType: kmsg.ACLResourceType(b.ResourceType),
				ResourceName: b.ResourceName, ResourcePatternType: kmsg.ACLResourcePatternType(b.PatternType)})
		}
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, kmsg.DescribeACLsResponseResourceACL{Principal: b.Principal, Host: b.Host,
			Operation: kmsg.ACLOperation(b.Operation), PermissionType: kmsg.ACLPermissionType(b.Permission)})
	}
	return resp
}

// deleteAcls deletes what the filters select, with one command, and lists
// per filter what was deleted.
func (a *admin) deleteAcls(ctx context.Context, r *protocol.DeleteAclsRequest) protocol.Response {
	resp := r.ResponseKind().(*protocol.DeleteAclsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	if len(r.Filters) == 0 {
		return resp
	}
	filters := make([]acl.Filter, len(r.Filters))
	for i, f := range r.Filters {
		filters[i] = aclFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
	}
	res, err := a.ctl.Apply(ctx, fsm.DeleteAdminACLs{Filters: filters})
	code, msg := int16(0), ""
	switch {
	case err != nil:
		code, msg = kerr.UnknownServerError.Code, err.Error()
	case res.ErrorCode != 0:
		code, msg = res.ErrorCode, res.ErrorMessage
	}
	for i := range resp.Results {
		if code != 0 {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, strPtr(msg)
			continue
		}
		if i >= len(res.DeletedACLs) {
			continue
		}
		for _, b := range res.DeletedACLs[i] {
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, kmsg.DeleteACLsResponseResultMatchingACL{
				ResourceType: kmsg.ACLResourceType(b.ResourceType), ResourceName: b.ResourceName,
				ResourcePatternType: kmsg.ACLResourcePatternType(b.PatternType), Principal: b.Principal, Host: b.Host,
				Operation: kmsg.ACLOperation(b.Operation), PermissionType: kmsg.ACLPermissionType(b.Permission)})
		}
	}
	if code == 0 {
		a.log.Info("deleted admin ACLs", zap.Int("filters", len(filters)))
	}
	return resp
}
