package main

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/protocol"
)

// TestACLCommands checks the kafka-acls.sh --cluster-mirror workflow of
// KIP-1279 section 8.4: the requests and the outputs as the KIP prints them.
func TestACLCommands(t *testing.T) {
	six := make([]kmsg.CreateACLsResponseResult, 6)
	created := &protocol.CreateAclsResponse{}
	created.Results = six
	listed := &protocol.DescribeAclsResponse{}
	listed.Resources = []kmsg.DescribeACLsResponseResource{{ResourceType: 8, ResourceName: "my-mirror", ResourcePatternType: 3,
		ACLs: []kmsg.DescribeACLsResponseResourceACL{{Principal: "User:mirror-admin", Host: "*", Operation: 5, PermissionType: 3},
			{Principal: "User:mirror-admin", Host: "*", Operation: 11, PermissionType: 3}}}}
	denied := &protocol.CreateAclsResponse{}
	denied.Results = []kmsg.CreateACLsResponseResult{{ErrorCode: 31, ErrorMessage: strp("principal User:alice is not authorized to ALTER CLUSTER kafka-cluster")}}
	removed := &protocol.DeleteAclsResponse{}
	removed.Results = []kmsg.DeleteACLsResponseResult{{MatchingACLs: []kmsg.DeleteACLsResponseResultMatchingACL{
		{ResourceType: 8, ResourceName: "*", ResourcePatternType: 3, Principal: "User:monitor", Host: "*", Operation: 8, PermissionType: 3}}}}

	wantCreate := &protocol.CreateAclsRequest{}
	wantCreate.SetVersion(3)
	for _, op := range []kmsg.ACLOperation{5, 7, 8, 6, 11, 10} {
		wantCreate.Creations = append(wantCreate.Creations, kmsg.CreateACLsRequestCreation{ResourceType: 8, ResourceName: "my-mirror",
			ResourcePatternType: 3, Principal: "User:mirror-admin", Host: "*", Operation: op, PermissionType: 3})
	}
	runCases(t, []cliCase{
		{
			name: "add, the mirror admin",
			args: []string{"--add-acl", "--cluster-mirror", "my-mirror", "--operation", "Create", "--operation", "Alter", "--operation", "Describe",
				"--operation", "Delete", "--operation", "AlterConfigs", "--operation", "DescribeConfigs", "--allow-principal", "User:mirror-admin"},
			resp: []protocol.Response{created},
			wantOut: "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, patternType=LITERAL)`:\n" +
				"      (principal=User:mirror-admin, host=*, operation=CREATE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=ALTER, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=DESCRIBE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=DELETE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=ALTER_CONFIGS, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)\n\n",
			wantReq: wantCreate,
		},
		{
			name: "list a mirror",
			args: []string{"--list-acls", "--cluster-mirror", "my-mirror"},
			resp: []protocol.Response{listed},
			wantOut: "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, patternType=LITERAL)`:\n" +
				"      (principal=User:mirror-admin, host=*, operation=CREATE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=ALTER_CONFIGS, permissionType=ALLOW)\n\n",
		},
		{
			name:     "add denied",
			args:     []string{"--add-acl", "--cluster-mirror", "*", "--operation", "All", "--allow-principal", "User:alice"},
			resp:     []protocol.Response{denied},
			wantErr:  "Error: CLUSTER_AUTHORIZATION_FAILED: principal User:alice is not authorized to ALTER CLUSTER kafka-cluster\n",
			wantCode: 1,
		},
		{
			name: "remove the monitor",
			args: []string{"--remove-acl", "--cluster-mirror", "*", "--operation", "Describe", "--allow-principal", "User:monitor"},
			resp: []protocol.Response{removed},
			wantOut: "Removing ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=*, patternType=LITERAL)`:\n" +
				"      (principal=User:monitor, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n",
		},
		{
			name: "a principal with commas", args: []string{"--add-acl", "--cluster", "--operation", "Alter", "--allow-principal", "User:CN=ops,O=example"},
			resp: []protocol.Response{func() protocol.Response {
				r := &protocol.CreateAclsResponse{}
				r.Results = make([]kmsg.CreateACLsResponseResult, 1)
				return r
			}()},
			wantOut: "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:\n" +
				"      (principal=User:CN=ops,O=example, host=*, operation=ALTER, permissionType=ALLOW)\n\n",
		},
		{
			// KIP-1279 section 8.4 as written: kafka-acls.sh's --add.
			name: "kafka-acls --add",
			args: []string{"--add", "--cluster-mirror", "my-mirror", "--operation", "Create", "--operation", "Alter", "--operation", "Describe",
				"--operation", "Delete", "--operation", "AlterConfigs", "--operation", "DescribeConfigs", "--allow-principal", "User:mirror-admin"},
			resp: []protocol.Response{created},
			wantOut: "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, patternType=LITERAL)`:\n" +
				"      (principal=User:mirror-admin, host=*, operation=CREATE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=ALTER, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=DESCRIBE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=DELETE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=ALTER_CONFIGS, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)\n\n",
			wantReq: wantCreate,
		},
		{
			name: "kafka-acls --list --cluster-mirror",
			args: []string{"--list", "--cluster-mirror", "my-mirror"},
			resp: []protocol.Response{listed},
			wantOut: "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=my-mirror, patternType=LITERAL)`:\n" +
				"      (principal=User:mirror-admin, host=*, operation=CREATE, permissionType=ALLOW)\n" +
				"      (principal=User:mirror-admin, host=*, operation=ALTER_CONFIGS, permissionType=ALLOW)\n\n",
		},
		{
			name: "kafka-acls --remove, the resource given with =",
			args: []string{"--remove", "--cluster-mirror=*", "--operation", "Describe", "--allow-principal", "User:monitor"},
			resp: []protocol.Response{removed},
			wantOut: "Removing ACLs for resource `ResourcePattern(resourceType=CLUSTER_MIRROR, name=*, patternType=LITERAL)`:\n" +
				"      (principal=User:monitor, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n",
		},
		{name: "kafka-acls --add without a resource is an ambiguous prefix", args: []string{"--add", "--operation", "Alter"}, wantCode: 1,
			wantErr: "Error: option --add is ambiguous: it could be --add-acl, --add-config, --add-config-file or --add-sidecar (see --help)\n"},
		{name: "a resource flag's name as another flag's value is no resource", args: []string{"--list", "--mirror", "--cluster"}, wantCode: 1,
			wantErr: "Error: --mirror is not valid with --list\n"},
		{name: "add without operation", args: []string{"--add-acl", "--cluster-mirror", "m", "--allow-principal", "User:a"}, wantCode: 1,
			wantErr: "Error: --add-acl requires --operation (Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs or All)\n"},
		{name: "an operation CLUSTER_MIRROR has not", args: []string{"--add-acl", "--cluster-mirror", "m", "--allow-principal", "User:a", "--operation", "Write"}, wantCode: 1,
			wantErr: "Error: --operation Write: acl: invalid binding: operation \"Write\" (expected Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs or All)\n"},
		{name: "--mirror instead of --cluster-mirror", args: []string{"--list-acls", "--mirror", "m"}, wantCode: 1,
			wantErr: "Error: --mirror is not valid with --list-acls; name the mirror with --cluster-mirror, as kafka-acls.sh does\n"},
		{name: "ACL flags elsewhere", args: []string{"--list", "--operation", "Alter"}, wantCode: 1,
			wantErr: "Error: --cluster-mirror, --cluster, --allow-principal, --deny-principal, --allow-host, --deny-host, --operation, --resource-pattern-type and --principal are only valid with --add-acl, --list-acls or --remove-acl\n"},
	})
}

// TestCommandConfigSASL runs the CLI against an admin endpoint that relays
// SASL to a kfake broker: --command-config with Kafka's SCRAM and PLAIN
// properties authenticates, the endpoint sees the user's principal, and a
// wrong password is refused.
func TestCommandConfigSASL(t *testing.T) {
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "ops", "ops-secret"), kfake.User("PLAIN", "alice", "alice-secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	h := &fakeHandler{}
	srv := protocol.NewServer(h, protocol.SASL(protocol.NewSASLRelay(broker.ListenAddrs(), nil, []string{"PLAIN", "SCRAM-SHA-512"})))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, protocol.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	addr := l.Addr().String()
	scram := writeFile(t, "scram.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"ops\" password=\"ops-secret\";\n")
	plainCfg := writeFile(t, "plain.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"alice-secret\";\n")
	for _, cc := range []string{scram, plainCfg} {
		if out, errOut, code := runCLI(t, "--bootstrap-server", addr, "--command-config", cc, "--list"); code != 0 {
			t.Fatalf("--list with %s: %d %q %q", cc, code, out, errOut)
		}
	}
	h.mu.Lock()
	var principals []string
	for _, in := range h.infos {
		principals = append(principals, in.Principal)
	}
	h.mu.Unlock()
	if strings.Join(principals, ",") != "User:ops,User:alice" {
		t.Fatalf("principals %v, want User:ops then User:alice", principals)
	}

	wrong := writeFile(t, "wrong.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"ops\" password=\"hunter2\";\n")
	_, errOut, code := runCLI(t, "--bootstrap-server", addr, "--command-config", wrong, "--list")
	if code != 1 || !strings.Contains(errOut, "SASL_AUTHENTICATION_FAILED") || strings.Contains(errOut, "hunter2") {
		t.Fatalf("wrong password: %d %q", code, errOut)
	}
	// Without --command-config the endpoint closes the connection.
	_, errOut, code = runCLI(t, "--bootstrap-server", addr, "--list")
	if code != 1 || !strings.Contains(errOut, "ListClusterMirrors request failed") {
		t.Fatalf("unauthenticated: %d %q", code, errOut)
	}
	if n := len(h.requests()); n != 2 {
		t.Fatalf("the handler saw %d requests, want the 2 authenticated ones", n)
	}
}
