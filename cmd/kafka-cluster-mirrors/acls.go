package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"

	"github.com/sidemirror/sidemirror/internal/acl"
	"github.com/sidemirror/sidemirror/protocol"
)

// This file holds the ACL actions, KIP-1279's kafka-acls.sh --cluster-mirror
// workflow (section 8.4) with kafka-acls' flags and outputs:
//
//	--add-acl --cluster-mirror my-mirror --operation Create --operation Alter --allow-principal User:mirror-admin
//	--list-acls [--cluster-mirror my-mirror | --cluster] [--principal User:monitor]
//	--remove-acl --cluster-mirror my-mirror [--operation Alter] [--allow-principal User:mirror-admin]
//
// --cluster names Kafka's CLUSTER resource, whose ALTER the raft membership
// and the ACL actions themselves need. kafka-acls.sh's own action names,
// --add, --list and --remove, are taken too when the command line names an
// ACL resource or principal (kafkaACLsVerbs), so the KIP's commands run as
// written.

// aclActions manage ACLs; they take no --mirror.
var aclActions = map[string]bool{"add-acl": true, "list-acls": true, "remove-acl": true}

// kafkaACLsVerbs are kafka-acls.sh's actions and the ones they stand for.
var kafkaACLsVerbs = map[string]string{"add": "add-acl", "list": "list-acls", "remove": "remove-acl"}

// aclResourceFlags are the flags that make --add, --list and --remove
// kafka-acls.sh's actions.
var aclResourceFlags = []string{"cluster-mirror", "cluster", "allow-principal", "deny-principal", "principal"}

// rewriteKafkaACLsVerbs rewrites kafka-acls.sh's --add, --list and
// --remove to --add-acl, --list-acls and --remove-acl when args name an
// ACL resource or principal (aclResourceFlags, spelled out in full), as
// in KIP-1279 section 8.4: kafka-acls.sh --add --cluster-mirror my-mirror
// ... Otherwise args are returned as they are: --list lists the mirrors,
// and --add and --remove are ambiguous prefixes (expandPrefixes says so).
// args[0] is the program name; "--" ends the options, and the value of a
// flag that takes one (given in full) is skipped.
func rewriteKafkaACLsVerbs(args []string, flags []cli.Flag) []string {
	takesValue := map[string]bool{}
	for _, f := range flags {
		if _, isBool := f.(*cli.BoolFlag); !isBool {
			for _, n := range f.Names() {
				takesValue[n] = true
			}
		}
	}
	var verbs []int
	resource := false
	for i := 1; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !strings.HasPrefix(arg, "--") {
			continue
		}
		if _, ok := kafkaACLsVerbs[name]; ok && !hasValue {
			verbs = append(verbs, i)
		}
		resource = resource || slices.Contains(aclResourceFlags, name)
		if takesValue[name] && !hasValue {
			i++
		}
	}
	if !resource || len(verbs) == 0 {
		return args
	}
	out := slices.Clone(args)
	for _, i := range verbs {
		out[i] = "--" + kafkaACLsVerbs[strings.TrimPrefix(out[i], "--")]
	}
	return out
}

// aclFlags are the flags of the ACL actions.
type aclFlags struct {
	ClusterMirror      string // --cluster-mirror
	clusterMirrorGiven bool
	Cluster            bool     // --cluster
	AllowPrincipals    []string // --allow-principal
	DenyPrincipals     []string // --deny-principal
	AllowHosts         []string // --allow-host
	DenyHosts          []string // --deny-host
	Operations         []string // --operation
	PatternType        string   // --resource-pattern-type
	Principal          string   // --principal (--list-acls)
}

// aclCLIFlags are the command line flags of the ACL actions.
func aclCLIFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "add-acl"},
		&cli.BoolFlag{Name: "list-acls"},
		&cli.BoolFlag{Name: "remove-acl"},
		&cli.StringFlag{Name: "cluster-mirror"},
		&cli.BoolFlag{Name: "cluster"},
		&cli.StringSliceFlag{Name: "allow-principal"},
		&cli.StringSliceFlag{Name: "deny-principal"},
		&cli.StringSliceFlag{Name: "allow-host"},
		&cli.StringSliceFlag{Name: "deny-host"},
		&cli.StringSliceFlag{Name: "operation"},
		&cli.StringFlag{Name: "resource-pattern-type"},
		&cli.StringFlag{Name: "principal"},
	}
}

func aclFlagsFrom(c *cli.Context) aclFlags {
	return aclFlags{
		ClusterMirror: c.String("cluster-mirror"), clusterMirrorGiven: c.IsSet("cluster-mirror"), Cluster: c.Bool("cluster"),
		AllowPrincipals: c.StringSlice("allow-principal"), DenyPrincipals: c.StringSlice("deny-principal"),
		AllowHosts: c.StringSlice("allow-host"), DenyHosts: c.StringSlice("deny-host"),
		Operations: c.StringSlice("operation"), PatternType: c.String("resource-pattern-type"), Principal: c.String("principal"),
	}
}

// given reports whether any ACL flag was given, for the other actions'
// validation.
func (f aclFlags) given() bool {
	return f.clusterMirrorGiven || f.Cluster || len(f.AllowPrincipals)+len(f.DenyPrincipals)+len(f.AllowHosts)+len(f.DenyHosts)+len(f.Operations) > 0 ||
		f.PatternType != "" || f.Principal != ""
}

// validateACL checks the ACL flags for action a.
func (cfg *Config) validateACL() error {
	a, f := cfg.Action, cfg.ACL
	if !aclActions[a] {
		if f.given() {
			return errors.New("--cluster-mirror, --cluster, --allow-principal, --deny-principal, --allow-host, --deny-host, --operation, --resource-pattern-type and --principal are only valid with --add-acl, --list-acls or --remove-acl")
		}
		return nil
	}
	principals := len(f.AllowPrincipals) + len(f.DenyPrincipals)
	switch {
	case cfg.Mirror != "":
		return fmt.Errorf("--mirror is not valid with --%s; name the mirror with --cluster-mirror, as kafka-acls.sh does", a)
	case f.clusterMirrorGiven && f.Cluster:
		return errors.New("give --cluster-mirror or --cluster, not both")
	case f.clusterMirrorGiven && f.ClusterMirror == "":
		return errors.New("--cluster-mirror is empty: give a mirror name, or '*' for every mirror")
	case a != "list-acls" && !f.clusterMirrorGiven && !f.Cluster:
		return fmt.Errorf("--%s requires --cluster-mirror <mirror> (or '*'), or --cluster", a)
	case a == "add-acl" && principals == 0:
		return errors.New("--add-acl requires --allow-principal or --deny-principal (e.g. User:mirror-admin)")
	case a == "add-acl" && len(f.Operations) == 0:
		return errors.New("--add-acl requires --operation (Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs or All)")
	case a == "list-acls" && (principals > 0 || len(f.Operations) > 0 || len(f.AllowHosts)+len(f.DenyHosts) > 0):
		return errors.New("--list-acls takes --cluster-mirror, --cluster, --resource-pattern-type and --principal only")
	case a != "list-acls" && f.Principal != "":
		return errors.New("--principal is only valid with --list-acls; use --allow-principal or --deny-principal")
	case len(f.AllowHosts) > 0 && len(f.AllowPrincipals) == 0, len(f.DenyHosts) > 0 && len(f.DenyPrincipals) == 0:
		return errors.New("--allow-host needs --allow-principal and --deny-host needs --deny-principal")
	}
	for _, p := range append(append([]string{f.Principal}, f.AllowPrincipals...), f.DenyPrincipals...) {
		if typ, name, ok := strings.Cut(p, ":"); p != "" && (!ok || typ == "" || name == "") {
			return fmt.Errorf("principal %q is not Type:name (e.g. User:mirror-admin, or User:* for every user)", p)
		}
	}
	for _, op := range f.Operations {
		if _, err := acl.ParseOperation(op); err != nil {
			return fmt.Errorf("--operation %s: %w", op, err)
		}
	}
	if _, err := f.patternType(a); err != nil {
		return err
	}
	return nil
}

// patternType returns --resource-pattern-type's code: LITERAL by default
// for adding and removing, ANY for listing, as kafka-acls.sh.
func (f aclFlags) patternType(action string) (int8, error) {
	switch strings.ToUpper(f.PatternType) {
	case "":
		if action == "list-acls" {
			return acl.PatternAny, nil
		}
		return acl.PatternLiteral, nil
	case "LITERAL":
		return acl.PatternLiteral, nil
	case "PREFIXED":
		return acl.PatternPrefixed, nil
	case "ANY", "MATCH":
		if action == "add-acl" {
			return 0, fmt.Errorf("--resource-pattern-type %s is not valid with --add-acl (expected LITERAL or PREFIXED)", f.PatternType)
		}
		if strings.EqualFold(f.PatternType, "MATCH") {
			return acl.PatternMatch, nil
		}
		return acl.PatternAny, nil
	}
	return 0, fmt.Errorf("--resource-pattern-type %q is not one of LITERAL, PREFIXED, ANY or MATCH", f.PatternType)
}

// resource returns the resource type and name the flags select (type ANY
// and no name when --list-acls names none).
func (f aclFlags) resource() (int8, *string) {
	switch {
	case f.Cluster:
		name := acl.ClusterName
		return acl.ResourceCluster, &name
	case f.clusterMirrorGiven:
		name := f.ClusterMirror
		return acl.ResourceClusterMirror, &name
	}
	return acl.ResourceAny, nil
}

// bindings returns the ACLs --add-acl or --remove-acl names: each allowed
// and denied principal on each of its hosts (default *) for each operation.
func (f aclFlags) bindings(action string) []acl.Binding {
	typ, name := f.resource()
	pattern, _ := f.patternType(action)
	var out []acl.Binding
	add := func(principals, hosts []string, perm acl.Permission) {
		if len(hosts) == 0 {
			hosts = []string{acl.Wildcard}
		}
		for _, p := range principals {
			for _, h := range hosts {
				for _, o := range f.Operations {
					op, _ := acl.ParseOperation(o)
					out = append(out, acl.Binding{ResourceType: typ, ResourceName: *name, PatternType: pattern,
						Principal: p, Host: h, Operation: op, Permission: perm})
				}
			}
		}
	}
	add(f.AllowPrincipals, f.AllowHosts, acl.PermissionAllow)
	add(f.DenyPrincipals, f.DenyHosts, acl.PermissionDeny)
	return out
}

// resourcePattern prints a resource pattern as kafka-acls.sh does.
func resourcePattern(typ int8, name string, pattern int8) string {
	return fmt.Sprintf("`ResourcePattern(resourceType=%s, name=%s, patternType=%s)`", acl.ResourceName(typ), name, acl.PatternName(pattern))
}

// aclLine prints one ACL as kafka-acls.sh does.
func aclLine(principal, host string, op acl.Operation, perm acl.Permission) string {
	return fmt.Sprintf("      (principal=%s, host=%s, operation=%s, permissionType=%s)", principal, host, op, perm)
}

// addACLs sends CreateAcls for the named bindings.
func addACLs(ctx context.Context, cl client, f aclFlags, out io.Writer) error {
	bs := f.bindings("add-acl")
	req := &protocol.CreateAclsRequest{}
	req.SetVersion(3)
	for _, b := range bs {
		req.Creations = append(req.Creations, kmsg.CreateACLsRequestCreation{ResourceType: kmsg.ACLResourceType(b.ResourceType),
			ResourceName: b.ResourceName, ResourcePatternType: kmsg.ACLResourcePatternType(b.PatternType), Principal: b.Principal,
			Host: b.Host, Operation: kmsg.ACLOperation(b.Operation), PermissionType: kmsg.ACLPermissionType(b.Permission)})
	}
	resp, err := do[*protocol.CreateAclsResponse](ctx, cl, req)
	if err != nil {
		return err
	}
	if len(resp.Results) != len(bs) {
		return fmt.Errorf("CreateAcls answered %d results for %d ACLs", len(resp.Results), len(bs))
	}
	for _, r := range resp.Results {
		if err := protocol.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "Adding ACLs for resource %s:\n", resourcePattern(bs[0].ResourceType, bs[0].ResourceName, bs[0].PatternType))
	for _, b := range bs {
		fmt.Fprintln(out, aclLine(b.Principal, b.Host, b.Operation, b.Permission))
	}
	fmt.Fprintln(out)
	return nil
}

// listACLs sends DescribeAcls and prints the ACLs by resource pattern.
func listACLs(ctx context.Context, cl client, f aclFlags, out io.Writer) error {
	typ, name := f.resource()
	pattern, _ := f.patternType("list-acls")
	req := &protocol.DescribeAclsRequest{}
	req.SetVersion(3)
	req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceType(typ), name, kmsg.ACLResourcePatternType(pattern)
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if f.Principal != "" {
		p := f.Principal
		req.Principal = &p
	}
	resp, err := do[*protocol.DescribeAclsResponse](ctx, cl, req)
	if err != nil {
		return err
	}
	if err := protocol.ErrorFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	for _, r := range resp.Resources {
		fmt.Fprintf(out, "Current ACLs for resource %s:\n", resourcePattern(int8(r.ResourceType), r.ResourceName, int8(r.ResourcePatternType)))
		for _, a := range r.ACLs {
			fmt.Fprintln(out, aclLine(a.Principal, a.Host, acl.Operation(a.Operation), acl.Permission(a.PermissionType)))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// removeACLs sends DeleteAcls: the named bindings, or without principals
// and operations every ACL of the resource pattern.
func removeACLs(ctx context.Context, cl client, f aclFlags, out io.Writer) error {
	typ, name := f.resource()
	pattern, _ := f.patternType("remove-acl")
	req := &protocol.DeleteAclsRequest{}
	req.SetVersion(3)
	filter := func(principal, host *string, op acl.Operation, perm acl.Permission) kmsg.DeleteACLsRequestFilter {
		return kmsg.DeleteACLsRequestFilter{ResourceType: kmsg.ACLResourceType(typ), ResourceName: name,
			ResourcePatternType: kmsg.ACLResourcePatternType(pattern), Principal: principal, Host: host,
			Operation: kmsg.ACLOperation(op), PermissionType: kmsg.ACLPermissionType(perm)}
	}
	if len(f.AllowPrincipals)+len(f.DenyPrincipals) == 0 {
		ops := []acl.Operation{acl.OpAny}
		if len(f.Operations) > 0 {
			ops = nil
			for _, o := range f.Operations {
				op, _ := acl.ParseOperation(o)
				ops = append(ops, op)
			}
		}
		for _, op := range ops {
			req.Filters = append(req.Filters, filter(nil, nil, op, acl.PermissionAny))
		}
	} else {
		if len(f.Operations) == 0 {
			f.Operations = []string{"All"}
		}
		for _, b := range f.bindings("remove-acl") {
			p, h := b.Principal, b.Host
			op := b.Operation
			if len(f.Operations) == 1 && f.Operations[0] == "All" {
				op = acl.OpAny
			}
			req.Filters = append(req.Filters, filter(&p, &h, op, b.Permission))
		}
	}
	resp, err := do[*protocol.DeleteAclsResponse](ctx, cl, req)
	if err != nil {
		return err
	}
	removed := 0
	for _, r := range resp.Results {
		if err := protocol.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
		for _, m := range r.MatchingACLs {
			if removed == 0 {
				fmt.Fprintf(out, "Removing ACLs for resource %s:\n", resourcePattern(int8(m.ResourceType), m.ResourceName, int8(m.ResourcePatternType)))
			}
			fmt.Fprintln(out, aclLine(m.Principal, m.Host, acl.Operation(m.Operation), acl.Permission(m.PermissionType)))
			removed++
		}
	}
	if removed == 0 {
		fmt.Fprintf(out, "No ACLs matched for resource %s\n", resourcePattern(typ, *name, pattern))
		return nil
	}
	fmt.Fprintln(out)
	return nil
}
