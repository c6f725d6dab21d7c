// Package acl decides access to the admin endpoint's resources the way
// Kafka's StandardAuthorizer decides access to a broker's: ACL bindings of
// a principal, a host, an operation and a permission on a resource
// pattern, with DENY winning over ALLOW, super users allowed everything,
// and DESCRIBE implied by ALTER, DELETE and CREATE (DESCRIBE_CONFIGS by
// ALTER_CONFIGS). Unlike a broker that sets allow.everyone.if.no.acl.found,
// a resource without a matching ALLOW is denied: once security is on,
// nothing is open by default.
//
// The resources are KIP-1279's CLUSTER_MIRROR (code 8, a mirror's name; a
// literal "*" matches every mirror) and Kafka's CLUSTER (code 4,
// "kafka-cluster"), for the raft group's membership. The package is pure:
// bindings are kept by the caller (the raft state), which also checks them
// with Validate before storing.
//
// Files: acl.go.
package acl

import (
	"errors"
	"fmt"
	"strings"
)

// Resource types, Kafka's codes (KIP-1279 adds CLUSTER_MIRROR).
const (
	ResourceAny           int8 = 1
	ResourceCluster       int8 = 4
	ResourceClusterMirror int8 = 8
)

// ClusterName is the name of the CLUSTER resource, as in Kafka.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name, principal and host that match
// every one.
const Wildcard = "*"

// Pattern types, Kafka's codes.
const (
	PatternAny      int8 = 1
	PatternMatch    int8 = 2
	PatternLiteral  int8 = 3
	PatternPrefixed int8 = 4
)

// Operation is an ACL operation, Kafka's codes.
type Operation int8

// Operations on CLUSTER_MIRROR (the KIP's six), and ALL, ANY and
// CLUSTER's ALTER/DESCRIBE.
const (
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
)

var opNames = map[Operation]string{
	OpAny: "ANY", OpAll: "ALL", OpCreate: "CREATE", OpDelete: "DELETE", OpAlter: "ALTER",
	OpDescribe: "DESCRIBE", OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS",
}

func (o Operation) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(o))
}

// ParseOperation reads kafka-acls' --operation spellings: Create,
// AlterConfigs, ALTER_CONFIGS, alter-configs.
func ParseOperation(s string) (Operation, error) {
	norm := strings.ToUpper(strings.NewReplacer("-", "", "_", "").Replace(s))
	for op, n := range opNames {
		if op != OpAny && strings.ReplaceAll(n, "_", "") == norm {
			return op, nil
		}
	}
	return 0, fmt.Errorf("%w: operation %q (expected Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs or All)", ErrInvalid, s)
}

// Permission is ALLOW or DENY, Kafka's codes.
type Permission int8

// Permissions.
const (
	PermissionAny   Permission = 1
	PermissionDeny  Permission = 2
	PermissionAllow Permission = 3
)

func (p Permission) String() string {
	switch p {
	case PermissionAllow:
		return "ALLOW"
	case PermissionDeny:
		return "DENY"
	case PermissionAny:
		return "ANY"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(p))
}

// ErrInvalid is matched by errors for bindings that cannot be stored.
var ErrInvalid = errors.New("acl: invalid binding")

// Binding is one ACL: Principal (User:<name> or User:*) on Host (an IP
// address or *) may (ALLOW) or may not (DENY) do Operation on the resources
// that ResourceType, ResourceName and PatternType select.
type Binding struct {
	ResourceType int8       `json:"resourceType"`
	ResourceName string     `json:"resourceName"`
	PatternType  int8       `json:"patternType"`
	Principal    string     `json:"principal"`
	Host         string     `json:"host"`
	Operation    Operation  `json:"operation"`
	Permission   Permission `json:"permission"`
}

// Validate checks that b can be stored: a known resource type and
// operation, a literal or prefixed pattern, a principal of the form
// Type:name, a host, ALLOW or DENY.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType != ResourceClusterMirror && b.ResourceType != ResourceCluster:
		return fmt.Errorf("%w: resource type %d (expected CLUSTER_MIRROR (8) or CLUSTER (4))", ErrInvalid, b.ResourceType)
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("%w: the CLUSTER resource is named %s, not %q", ErrInvalid, ClusterName, b.ResourceName)
	case b.ResourceName == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("%w: pattern type %d (expected LITERAL (3) or PREFIXED (4))", ErrInvalid, b.PatternType)
	case !strings.Contains(b.Principal, ":") || strings.HasPrefix(b.Principal, ":") || strings.HasSuffix(b.Principal, ":"):
		return fmt.Errorf("%w: principal %q (expected Type:name, such as User:alice or User:*)", ErrInvalid, b.Principal)
	case b.Host == "":
		return fmt.Errorf("%w: empty host (expected an IP address or *)", ErrInvalid)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("%w: permission %d (expected ALLOW or DENY)", ErrInvalid, b.Permission)
	}
	if _, ok := opNames[b.Operation]; !ok || b.Operation == OpAny {
		return fmt.Errorf("%w: operation %d", ErrInvalid, b.Operation)
	}
	return nil
}

// resourceMatches reports whether b's pattern selects the resource.
func (b Binding) resourceMatches(resourceType int8, name string) bool {
	if b.ResourceType != resourceType {
		return false
	}
	switch b.PatternType {
	case PatternLiteral:
		return b.ResourceName == name || b.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

func principalMatches(acl, principal string) bool {
	if acl == principal {
		return true
	}
	typ, name, _ := strings.Cut(acl, ":")
	ptyp, _, _ := strings.Cut(principal, ":")
	return name == Wildcard && typ == ptyp
}

func hostMatches(acl, host string) bool { return acl == Wildcard || acl == host }

// implies reports whether an ACL for op grants want: ALL grants all,
// DESCRIBE follows from CREATE, DELETE and ALTER, DESCRIBE_CONFIGS from
// ALTER_CONFIGS (as in Kafka). DENY ACLs deny only what they name (or ALL).
func implies(op, want Operation, allow bool) bool {
	switch {
	case op == want || op == OpAll:
		return true
	case !allow:
		return false
	case want == OpDescribe:
		return op == OpCreate || op == OpDelete || op == OpAlter
	case want == OpDescribeConfigs:
		return op == OpAlterConfigs
	}
	return false
}

// Request is what is asked: may Principal on Host do Operation on the
// resource?
type Request struct {
	Principal    string
	Host         string
	Operation    Operation
	ResourceType int8
	ResourceName string
}

// Authorize decides req against the bindings: super users are allowed
// everything; a matching DENY denies; a matching ALLOW allows; nothing
// matching denies.
func Authorize(req Request, bindings []Binding, superUsers []string) bool {
	for _, su := range superUsers {
		if su == req.Principal {
			return true
		}
	}
	allowed := false
	for _, b := range bindings {
		if !b.resourceMatches(req.ResourceType, req.ResourceName) || !principalMatches(b.Principal, req.Principal) ||
			!hostMatches(b.Host, req.Host) {
			continue
		}
		allow := b.Permission == PermissionAllow
		if !implies(b.Operation, req.Operation, allow) {
			continue
		}
		if !allow {
			return false
		}
		allowed = true
	}
	return allowed
}

// Filter selects bindings, as DescribeAcls and DeleteAcls filters do: zero
// values, ANY and a nil name match everything; PatternMatch matches the
// bindings that apply to the named resource.
type Filter struct {
	ResourceType int8
	ResourceName *string
	PatternType  int8
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != 0 && f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case 0, PatternAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case PatternMatch:
		if f.ResourceName != nil && !b.resourceMatches(b.ResourceType, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || (f.ResourceName != nil && *f.ResourceName != b.ResourceName) {
			return false
		}
	}
	switch {
	case f.Principal != nil && *f.Principal != b.Principal:
		return false
	case f.Host != nil && *f.Host != b.Host:
		return false
	case f.Operation != 0 && f.Operation != OpAny && f.Operation != b.Operation:
		return false
	case f.Permission != 0 && f.Permission != PermissionAny && f.Permission != b.Permission:
		return false
	}
	return true
}

// PatternName returns Kafka's name of a pattern type.
func PatternName(p int8) string {
	switch p {
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	case PatternMatch:
		return "MATCH"
	case PatternAny:
		return "ANY"
	}
	return fmt.Sprintf("UNKNOWN(%d)", p)
}

// ResourceName returns Kafka's name of a resource type.
func ResourceName(t int8) string {
	switch t {
	case ResourceClusterMirror:
		return "CLUSTER_MIRROR"
	case ResourceCluster:
		return "CLUSTER"
	case ResourceAny:
		return "ANY"
	}
	return fmt.Sprintf("UNKNOWN(%d)", t)
}
