package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// aclResourceGroup is the Kafka protocol code of GROUP resources.
const aclResourceGroup int8 = 3

// literalACLs lists a cluster's ACLs with a literal resource name of the
// given resource type. A cluster without an authorizer has none
// (ErrNoAuthorizer).
func literalACLs(ctx context.Context, cl *kgo.Client, resourceType int8) ([]fsm.ACL, error) {
	return describeACLs(ctx, cl, resourceType, nil, aclPatternLiteral)
}

// aclPlan is what the ACL sync does: create and delete on the destination,
// and the new list of ACLs the sync owns.
type aclPlan struct {
	create, remove, owned []fsm.ACL
}

// planACLs compares the source's ACLs in scope with the destination's.
// inScope tells whether an ACL's resource is synced now (an active mirror
// topic, a synced group). The sync creates the source's ACLs in scope that
// the destination lacks and owns them; an owned ACL missing on the
// destination (recorded before a create that failed or was cut short, or
// deleted there by hand) is created again while the source has it. It
// deletes only ACLs it owns whose resource is in scope and that the source
// no longer has. ACLs of the sidecars (protected) and ACLs the sync did not
// create are never deleted; owned ACLs out of scope (a stopped topic) stay,
// so a failed-over application keeps its access.
func planACLs(source, dest, synced, protected []fsm.ACL, inScope func(fsm.ACL) bool) aclPlan {
	var p aclPlan
	for _, a := range synced {
		if inScope(a) && !slices.Contains(source, a) && !slices.Contains(protected, a) {
			p.remove = append(p.remove, a)
			continue
		}
		p.owned = append(p.owned, a)
	}
	for _, a := range source {
		if !inScope(a) || slices.Contains(protected, a) || slices.Contains(p.create, a) {
			continue
		}
		switch {
		case slices.Contains(p.owned, a):
			if !slices.Contains(dest, a) {
				p.create = append(p.create, a) // ours, but missing
			}
		case slices.Contains(dest, a):
			// someone else's: not ours to own
		default:
			p.create = append(p.create, a)
			p.owned = append(p.owned, a)
		}
	}
	return p
}

// syncACLs copies the ACLs of mirrored topics and synced groups (literal
// resource names, ALLOW and DENY) from the source to the destination and
// removes the ones it copied that were removed on the source.
func (r *metaSyncRound) syncACLs(ctx context.Context) (int, error) {
	filter, err := newGroupFilter(r.mirror)
	if err != nil {
		return 0, err
	}
	var source, dest []fsm.ACL
	for _, rt := range []int8{aclResourceTopic, aclResourceGroup} {
		s, err := literalACLs(ctx, r.src, rt)
		if errors.Is(err, ErrNoAuthorizer) {
			// No authorizer on the source: it has no ACLs to copy, and
			// nothing was removed there.
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("source ACLs: %w", err)
		}
		d, err := literalACLs(ctx, r.ms.destCl, rt)
		if errors.Is(err, ErrNoAuthorizer) {
			return 0, nil // nothing can be enforced on the destination
		}
		if err != nil {
			return 0, fmt.Errorf("destination ACLs: %w", err)
		}
		source, dest = append(source, s...), append(dest, d...)
	}
	var protected []fsm.ACL
	for _, t := range r.ms.ctl.State().Topics {
		protected = append(protected, t.OwnedACLs...)
	}
	inScope := func(a fsm.ACL) bool {
		switch a.ResourceType {
		case aclResourceTopic:
			return r.topics[a.ResourceName] != nil
		case aclResourceGroup:
			return filter.match(a.ResourceName)
		}
		return false
	}
	p := planACLs(source, dest, r.mirror.SyncedACLs, protected, inScope)
	if len(p.create) == 0 && len(p.remove) == 0 {
		return 0, nil
	}
	// Record first what we are about to create, so an ACL created just
	// before a crash is still known as ours; removals are recorded after.
	recordFirst := append(slices.Clone(p.owned), p.remove...)
	if len(p.create) > 0 {
		if err := r.apply(ctx, fsm.RecordSyncedACLs{Mirror: r.mirror.Name, ACLs: recordFirst}); err != nil {
			return 0, err
		}
		if err := r.ms.dest.createACLs(ctx, p.create); err != nil {
			return 0, err
		}
	}
	if len(p.remove) > 0 {
		if err := r.ms.dest.Unprotect(ctx, p.remove); err != nil {
			return len(p.create), err
		}
	}
	if err := r.apply(ctx, fsm.RecordSyncedACLs{Mirror: r.mirror.Name, ACLs: p.owned}); err != nil {
		return len(p.create) + len(p.remove), err
	}
	r.mirror.SyncedACLs = p.owned
	r.log.Info("synced ACLs", zap.Int("created", len(p.create)), zap.Int("deleted", len(p.remove)))
	return len(p.create) + len(p.remove), nil
}
