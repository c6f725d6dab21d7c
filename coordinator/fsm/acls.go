package fsm

import (
	"slices"

	"github.com/sidemirror/sidemirror/internal/acl"
)

// CreateAdminACLs adds ACLs of the admin endpoint (CreateAcls, DESIGN
// D15). Every binding must pass acl.Binding.Validate; one that is already
// stored is not stored twice (as Kafka ignores a duplicate). A bad binding
// fails the command and nothing is stored.
type CreateAdminACLs struct {
	ACLs []acl.Binding `json:"acls"`
}

// Type implements Command.
func (CreateAdminACLs) Type() CommandType { return CmdCreateAdminACLs }

// DeleteAdminACLs removes the ACLs of the admin endpoint that any of the
// filters selects (DeleteAcls); Result.DeletedACLs lists, per filter, the
// bindings it selected.
type DeleteAdminACLs struct {
	Filters []acl.Filter `json:"filters"`
}

// Type implements Command.
func (DeleteAdminACLs) Type() CommandType { return CmdDeleteAdminACLs }

func (c CreateAdminACLs) apply(s *State) Result {
	if len(c.ACLs) == 0 {
		return fail(codeInvalidRequest, "CreateAdminACLs carries no ACL")
	}
	for i, b := range c.ACLs {
		if err := b.Validate(); err != nil {
			return fail(codeInvalidRequest, "ACL #%d: %v", i+1, err)
		}
	}
	for _, b := range c.ACLs {
		if !slices.Contains(s.AdminACLs, b) {
			s.AdminACLs = append(s.AdminACLs, b)
		}
	}
	return Result{}
}

func (c DeleteAdminACLs) apply(s *State) Result {
	if len(c.Filters) == 0 {
		return fail(codeInvalidRequest, "DeleteAdminACLs carries no filter")
	}
	res := Result{DeletedACLs: make([][]acl.Binding, len(c.Filters))}
	kept := s.AdminACLs[:0:0]
	for _, b := range s.AdminACLs {
		matched := false
		for i, f := range c.Filters {
			if f.Matches(b) {
				res.DeletedACLs[i] = append(res.DeletedACLs[i], b)
				matched = true
			}
		}
		if !matched {
			kept = append(kept, b)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	s.AdminACLs = kept
	return res
}
