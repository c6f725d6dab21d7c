package acl

import (
	"testing"
)

func mirrorACL(name, principal string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: ResourceClusterMirror, ResourceName: name, PatternType: PatternLiteral,
		Principal: principal, Host: Wildcard, Operation: op, Permission: perm}
}

// TestKIPRoles checks the roles of KIP-1279 section 8.4: the mirror admin
// with all six operations on one mirror, the monitor with DESCRIBE and
// DESCRIBE_CONFIGS on every mirror.
func TestKIPRoles(t *testing.T) {
	var acls []Binding
	for _, op := range []Operation{OpCreate, OpAlter, OpDescribe, OpDelete, OpAlterConfigs, OpDescribeConfigs} {
		acls = append(acls, mirrorACL("my-mirror", "User:mirror-admin", op, PermissionAllow))
	}
	acls = append(acls, mirrorACL("*", "User:monitor", OpDescribe, PermissionAllow),
		mirrorACL("*", "User:monitor", OpDescribeConfigs, PermissionAllow))
	ask := func(p string, op Operation, mirror string) bool {
		return Authorize(Request{Principal: p, Host: "10.0.0.1", Operation: op, ResourceType: ResourceClusterMirror, ResourceName: mirror}, acls, []string{"User:root"})
	}
	for _, tc := range []struct {
		principal string
		op        Operation
		mirror    string
		want      bool
	}{
		{"User:mirror-admin", OpCreate, "my-mirror", true},
		{"User:mirror-admin", OpAlter, "my-mirror", true},
		{"User:mirror-admin", OpDelete, "my-mirror", true},
		{"User:mirror-admin", OpAlterConfigs, "my-mirror", true},
		{"User:mirror-admin", OpCreate, "other", false},
		{"User:monitor", OpDescribe, "my-mirror", true},
		{"User:monitor", OpDescribeConfigs, "any-mirror", true},
		{"User:monitor", OpAlter, "my-mirror", false},
		{"User:monitor", OpAlterConfigs, "my-mirror", false},
		{"User:alice", OpDescribe, "my-mirror", false}, // deny by default
		{"User:root", OpDelete, "anything", true},      // super user
	} {
		if got := ask(tc.principal, tc.op, tc.mirror); got != tc.want {
			t.Errorf("%s %s on %s = %v, want %v", tc.principal, tc.op, tc.mirror, got, tc.want)
		}
	}
}

func TestDenyWinsAndImplications(t *testing.T) {
	acls := []Binding{
		mirrorACL("*", "User:*", OpAll, PermissionAllow),
		mirrorACL("prod", "User:bob", OpAlter, PermissionDeny),
		{ResourceType: ResourceClusterMirror, ResourceName: "eu-", PatternType: PatternPrefixed, Principal: "User:carol", Host: "10.0.0.9", Operation: OpAlter, Permission: PermissionAllow},
	}
	req := func(p, host string, op Operation, name string) Request {
		return Request{Principal: p, Host: host, Operation: op, ResourceType: ResourceClusterMirror, ResourceName: name}
	}
	if Authorize(req("User:bob", "1.1.1.1", OpAlter, "prod"), acls, nil) {
		t.Error("DENY ALTER did not win over ALLOW ALL")
	}
	if !Authorize(req("User:bob", "1.1.1.1", OpDescribe, "prod"), acls, nil) {
		t.Error("a DENY ALTER denied DESCRIBE")
	}
	only := acls[2:]
	if !Authorize(req("User:carol", "10.0.0.9", OpAlter, "eu-west"), only, nil) ||
		!Authorize(req("User:carol", "10.0.0.9", OpDescribe, "eu-west"), only, nil) {
		t.Error("a prefixed ALLOW ALTER did not allow ALTER and DESCRIBE")
	}
	if Authorize(req("User:carol", "10.0.0.8", OpAlter, "eu-west"), only, nil) || Authorize(req("User:carol", "10.0.0.9", OpAlter, "us-east"), only, nil) {
		t.Error("host or prefix not honoured")
	}
	if Authorize(Request{Principal: "User:carol", Host: "10.0.0.9", Operation: OpAlter, ResourceType: ResourceCluster, ResourceName: ClusterName}, acls, nil) {
		t.Error("CLUSTER_MIRROR ACLs granted an operation on the CLUSTER")
	}
}

func TestFilterAndValidate(t *testing.T) {
	b := mirrorACL("my-mirror", "User:monitor", OpDescribe, PermissionAllow)
	name, other, principal := "my-mirror", "other", "User:monitor"
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{ResourceType: ResourceClusterMirror, ResourceName: &name, PatternType: PatternLiteral}, true},
		{Filter{ResourceName: &other}, false},
		{Filter{ResourceName: &name, PatternType: PatternMatch}, true},
		{Filter{Principal: &principal, Operation: OpDescribe, Permission: PermissionAllow}, true},
		{Filter{Operation: OpAlter}, false},
		{Filter{ResourceType: ResourceCluster}, false},
	} {
		if got := tc.f.Matches(b); got != tc.want {
			t.Errorf("%+v matches = %v, want %v", tc.f, got, tc.want)
		}
	}
	if err := b.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, bad := range []Binding{
		{ResourceType: 2, ResourceName: "t", PatternType: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpAlter, Permission: PermissionAllow},
		{ResourceType: ResourceCluster, ResourceName: "x", PatternType: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpAlter, Permission: PermissionAllow},
		{ResourceType: ResourceClusterMirror, ResourceName: "m", PatternType: PatternMatch, Principal: "User:a", Host: "*", Operation: OpAlter, Permission: PermissionAllow},
		{ResourceType: ResourceClusterMirror, ResourceName: "m", PatternType: PatternLiteral, Principal: "alice", Host: "*", Operation: OpAlter, Permission: PermissionAllow},
		{ResourceType: ResourceClusterMirror, ResourceName: "m", PatternType: PatternLiteral, Principal: "User:a", Host: "*", Operation: OpAny, Permission: PermissionAllow},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted it", bad)
		}
	}
	for s, want := range map[string]Operation{"Create": OpCreate, "AlterConfigs": OpAlterConfigs, "DESCRIBE_CONFIGS": OpDescribeConfigs, "all": OpAll} {
		if got, err := ParseOperation(s); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseOperation("Write"); err == nil {
		t.Error("ParseOperation(Write) accepted an operation CLUSTER_MIRROR has not")
	}
}
