package fsm_test

import (
	"reflect"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/internal/acl"
)

func mirrorBinding(name, principal string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceClusterMirror, ResourceName: name, PatternType: acl.PatternLiteral,
		Principal: principal, Host: "*", Operation: op, Permission: acl.PermissionAllow}
}

func TestApplyAdminACLs(t *testing.T) {
	admin := mirrorBinding("my-mirror", "User:mirror-admin", acl.OpAlter)
	monitor := mirrorBinding("*", "User:monitor", acl.OpDescribe)
	bad := admin
	bad.Principal = "mirror-admin" // no type
	runApplyCases(t, []applyCase{
		{name: "create", cmd: fsm.CreateAdminACLs{ACLs: []acl.Binding{admin, monitor, admin}}, check: func(t *testing.T, _, s *fsm.State) {
			if !reflect.DeepEqual(s.AdminACLs, []acl.Binding{admin, monitor}) {
				t.Fatalf("ACLs = %+v, want the two, the duplicate once", s.AdminACLs)
			}
		}},
		{name: "create again keeps one", setup: []fsm.Command{fsm.CreateAdminACLs{ACLs: []acl.Binding{admin}}},
			cmd: fsm.CreateAdminACLs{ACLs: []acl.Binding{admin}}, check: func(t *testing.T, _, s *fsm.State) {
				if len(s.AdminACLs) != 1 {
					t.Fatalf("ACLs = %+v", s.AdminACLs)
				}
			}},
		{name: "invalid binding stores nothing", cmd: fsm.CreateAdminACLs{ACLs: []acl.Binding{monitor, bad}}, code: invalidRequest, msg: "ACL #2"},
		{name: "empty", cmd: fsm.CreateAdminACLs{}, code: invalidRequest, msg: "no ACL"},
		{name: "delete by principal", setup: []fsm.Command{fsm.CreateAdminACLs{ACLs: []acl.Binding{admin, monitor}}},
			cmd: fsm.DeleteAdminACLs{Filters: []acl.Filter{{Principal: strPtr("User:monitor")}}}, check: func(t *testing.T, _, s *fsm.State) {
				if !reflect.DeepEqual(s.AdminACLs, []acl.Binding{admin}) {
					t.Fatalf("ACLs = %+v, want the admin's only", s.AdminACLs)
				}
			}},
		{name: "no filter", cmd: fsm.DeleteAdminACLs{}, code: invalidRequest, msg: "no filter"},
	})

	// The result lists what each filter deleted.
	s := fsmtest.State(t)
	fsmtest.MustApply(t, s, fsm.CreateAdminACLs{ACLs: []acl.Binding{admin, monitor}})
	res := fsm.ApplyTo(s, fsmtest.MustEncode(t, fsm.DeleteAdminACLs{Filters: []acl.Filter{
		{ResourceName: strPtr("my-mirror")}, {Operation: acl.OpCreate}, {ResourceType: acl.ResourceClusterMirror}}}))
	want := [][]acl.Binding{{admin}, nil, {admin, monitor}}
	if res.ErrorCode != 0 || !reflect.DeepEqual(res.DeletedACLs, want) {
		t.Fatalf("result = %+v, want deleted %+v", res, want)
	}
	if s.AdminACLs != nil {
		t.Fatalf("ACLs left: %+v", s.AdminACLs)
	}
	// A snapshot keeps them.
	fsmtest.MustApply(t, s, fsm.CreateAdminACLs{ACLs: []acl.Binding{monitor}})
	if c := s.Clone(); !reflect.DeepEqual(c.AdminACLs, s.AdminACLs) {
		t.Fatalf("clone lost the ACLs: %+v", c.AdminACLs)
	}
}
