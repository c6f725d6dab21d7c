package adminsec

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/internal/properties"
	"github.com/sidemirror/sidemirror/internal/security"
	"github.com/sidemirror/sidemirror/protocol"
)

// The principal that gets one ACL at a time: the SCRAM user mirror-ops,
// or a certificate for CN=Mirror-Ops that the mapping rules turn into the
// same name.
const (
	opsUser      = "mirror-ops"
	opsPassword  = "mirror-ops-secret"
	opsPrincipal = "User:" + opsUser
	// sslMapping is the SSL endpoint's admin.ssl.principal.mapping.rules:
	// CN=Mirror-Ops,O=sidemirror e2e becomes User:mirror-ops.
	sslMapping = "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT"
	// storePassword protects the PKCS12 and JKS stores.
	storePassword = "store-secret"
)

// endpoint is one admin.security.protocol of the sidecars: the keys that
// configure it and its clients, as --command-config files.
type endpoint struct {
	protocol string
	keys     map[string]string // the sidecars' keys
	root     string            // a super user (admin.super.users)
	ops      string            // opsPrincipal
	// refused are clients that must not get in: what each lacks, and
	// its command config ("" for none).
	refused map[string]string
}

// mirror is the name of the endpoint's mirror; topic its source topic.
func (e *endpoint) mirror() string {
	return "api-" + strings.ToLower(strings.ReplaceAll(e.protocol, "_", "-"))
}
func (e *endpoint) topic() string { return e.mirror() + "-t" }

// apiCheck is one admin API, as the CLI (or, for DescribeConfigs, which
// the CLI does not send, a client with the same security) calls it.
type apiCheck struct {
	api string
	// resource and op name the one ACL that allows the call (the
	// --add-acl resource flags and --operation), granted to opsPrincipal.
	resource func(e *endpoint) []string
	op       string
	call     func(t *testing.T, e *endpoint, commandConfig string) cliResult
	// denied checks how a principal without the ACL is refused;
	// nil: exit 1 with CLUSTER_AUTHORIZATION_FAILED.
	denied func(t *testing.T, e *endpoint, r cliResult)
	// ok checks the success, and its effect as the super user sees it,
	// waiting until the state it leads to is reached.
	ok func(t *testing.T, e *endpoint, r cliResult)
}

// theMirror is the endpoint's mirror as an ACL resource; theCluster
// Kafka's CLUSTER.
func theMirror(e *endpoint) []string { return []string{"--cluster-mirror", e.mirror()} }
func theCluster(*endpoint) []string  { return []string{"--cluster"} }

// aclTarget is the resource whose ACLs the ACL APIs' checks add, list and
// remove.
func aclTarget(e *endpoint) string { return e.mirror() + "-acl" }

// topicCall returns a call of a topic action on the endpoint's topic.
func topicCall(action string, topics func(e *endpoint) string) func(t *testing.T, e *endpoint, cfg string) cliResult {
	return func(t *testing.T, e *endpoint, cfg string) cliResult {
		return cli(t, cfg, "--"+action, "--topics", topics(e), "--mirror", e.mirror())
	}
}

func theTopic(e *endpoint) string { return e.topic() }

// okExit checks that r succeeded and printed want.
func okExit(t *testing.T, r cliResult, want string) {
	t.Helper()
	if r.Code != 0 || !strings.Contains(r.Stdout, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 printing %q", r.Code, r.Stdout, r.Stderr, want)
	}
}

// untilStates waits until every partition of the endpoint's topic is in
// state (lag 0 for MIRRORING), as the super user describes it.
func untilStates(t *testing.T, e *endpoint, state string) {
	t.Helper()
	wait.For(t, 2*time.Minute, e.topic()+" to be "+state, func() bool {
		m, ok := described(t, e.root, e.mirror())
		if !ok || len(m.Topics) != 1 || len(m.Topics[0].Partitions) != 2 {
			return false
		}
		for _, p := range m.Topics[0].Partitions {
			if p.State != state || state == "MIRRORING" && p.Lag != 0 {
				return false
			}
		}
		return true
	})
}

// apiChecks are every admin API, in an order in which each finds the
// mirror in the state it needs: created, described, started, ..., deleted.
var apiChecks = []apiCheck{
	{
		api:      "CreateClusterMirror",
		resource: theMirror, op: "Create",
		call: func(t *testing.T, e *endpoint, cfg string) cliResult {
			return cli(t, cfg, "--create", "--mirror", e.mirror(), "--mirror-config", mirrorConfigFile(t))
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, "Created mirror "+e.mirror())
			if !slices.Contains(listed(t, e.root), e.mirror()) {
				t.Fatalf("the super user does not list %s", e.mirror())
			}
		},
	},
	{
		api:      "ListClusterMirrors",
		resource: theMirror, op: "Describe",
		call: func(t *testing.T, _ *endpoint, cfg string) cliResult { return cli(t, cfg, "--list", "--json") },
		// KIP-1279: the list leaves out what the caller may not describe.
		denied: func(t *testing.T, e *endpoint, r cliResult) {
			if r.Code != 0 || strings.Contains(r.Stdout, e.mirror()) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 without %s", r.Code, r.Stdout, r.Stderr, e.mirror())
			}
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) { okExit(t, r, `"mirrorName": "`+e.mirror()+`"`) },
	},
	{
		api:      "DescribeClusterMirrors",
		resource: theMirror, op: "Describe",
		call: func(t *testing.T, e *endpoint, cfg string) cliResult {
			return cli(t, cfg, "--describe", "--mirror", e.mirror(), "--json")
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) { okExit(t, r, `"mirrorName": "`+e.mirror()+`"`) },
	},
	{
		api:      "DescribeConfigs",
		resource: theMirror, op: "DescribeConfigs",
		call: describeConfigs,
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, "bootstrap.servers="+env.Source.Bootstrap()+"\n")
		},
	},
	{
		api:      "IncrementalAlterConfigs",
		resource: theMirror, op: "AlterConfigs",
		call: func(t *testing.T, e *endpoint, cfg string) cliResult {
			return cli(t, cfg, "--alter", "--mirror", e.mirror(), "--add-config", "mirror.metadata.refresh.interval.ms=7000")
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, "Completed updating config for mirror "+e.mirror())
			if got := describeConfigs(t, e, e.root); !strings.Contains(got.Stdout, "mirror.metadata.refresh.interval.ms=7000\n") {
				t.Fatalf("after the alter the super user describes the configs: %+v", got)
			}
		},
	},
	{
		api:      "StartMirrorTopics",
		resource: theMirror, op: "Alter",
		call: topicCall("start", theTopic),
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, e.topic())
			untilStates(t, e, "MIRRORING")
		},
	},
	{
		api:      "PauseMirrorTopics",
		resource: theMirror, op: "Alter",
		call: topicCall("pause", theTopic),
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, e.topic())
			untilStates(t, e, "PAUSED")
		},
	},
	{
		api:      "ResumeMirrorTopics",
		resource: theMirror, op: "Alter",
		call: topicCall("resume", theTopic),
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, e.topic())
			untilStates(t, e, "MIRRORING")
		},
	},
	{
		// Nothing is FAILED: a pattern matches the topic and restarts
		// nothing, which succeeds.
		api:      "RecoverMirrorTopics",
		resource: theMirror, op: "Alter",
		call: topicCall("recover", func(e *endpoint) string { return e.topic() + ".*" }),
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, "Recovered 0 mirror topic(s) in mirror "+e.mirror())
			untilStates(t, e, "MIRRORING")
		},
	},
	{
		api:      "StopMirrorTopics",
		resource: theMirror, op: "Alter",
		call: topicCall("stop", theTopic),
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, e.topic())
			untilStates(t, e, "STOPPED")
		},
	},
	{
		api:      "DescribeSidecars",
		resource: theCluster, op: "Describe",
		call: func(t *testing.T, _ *endpoint, cfg string) cliResult { return cli(t, cfg, "--list-sidecars") },
		ok: func(t *testing.T, _ *endpoint, r cliResult) {
			okExit(t, r, env.Sidecars.Sidecars()[0].RaftAddr)
		},
	},
	{
		api:      "CreateAcls",
		resource: theCluster, op: "Alter",
		call: func(t *testing.T, e *endpoint, cfg string) cliResult {
			return cli(t, cfg, "--add-acl", "--cluster-mirror", aclTarget(e), "--operation", "Describe", "--allow-principal", "User:watcher")
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, "Adding ACLs for resource")
			if out := mustCLI(t, e.root, "--list-acls", "--cluster-mirror", aclTarget(e)); !strings.Contains(out, "principal=User:watcher") {
				t.Fatalf("the super user lists the ACLs of %s:\n%s", aclTarget(e), out)
			}
		},
	},
	{
		api:      "DescribeAcls",
		resource: theCluster, op: "Describe",
		call: func(t *testing.T, e *endpoint, cfg string) cliResult {
			return cli(t, cfg, "--list-acls", "--cluster-mirror", aclTarget(e))
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, "(principal=User:watcher, host=*, operation=DESCRIBE, permissionType=ALLOW)")
		},
	},
	{
		api:      "DeleteAcls",
		resource: theCluster, op: "Alter",
		call: func(t *testing.T, e *endpoint, cfg string) cliResult {
			return cli(t, cfg, "--remove-acl", "--cluster-mirror", aclTarget(e), "--allow-principal", "User:watcher")
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			if r.Code != 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
			}
			if out := mustCLI(t, e.root, "--list-acls", "--cluster-mirror", aclTarget(e)); strings.Contains(out, "User:watcher") {
				t.Fatalf("after the removal the super user lists:\n%s", out)
			}
		},
	},
	{
		api:      "DeleteClusterMirror",
		resource: theMirror, op: "Delete",
		call: func(t *testing.T, e *endpoint, cfg string) cliResult {
			return cli(t, cfg, "--delete", "--mirror", e.mirror())
		},
		ok: func(t *testing.T, e *endpoint, r cliResult) {
			okExit(t, r, "Deleted mirror "+e.mirror())
			if slices.Contains(listed(t, e.root), e.mirror()) {
				t.Fatalf("the super user still lists %s", e.mirror())
			}
		},
	},
}

// TestAdminAPIs calls every admin API on real Kafka through each admin
// endpoint protocol, the sidecars restarted between them: SASL_PLAINTEXT
// and SASL_SSL with the destination's SCRAM users (created with
// kafka-configs) relayed to a broker listener, SSL with client
// certificates whose subject the mapping rules turn into the principal.
// Per API: clients without valid credentials are refused, the principal
// without the API's ACL gets CLUSTER_AUTHORIZATION_FAILED (or, for the
// list, is shown nothing), and neither changes what the super user lists
// and describes (ACLs included); with the ACL the call succeeds.
func TestAdminAPIs(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.LogTails(60))
		}
	})
	dir := t.TempDir()
	kafkaConfigs(t, writeFile(t, dir, "admin.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		jaas("plain.PlainLoginModule", testbed.Admin.Name, testbed.Admin.Password)),
		"--alter", "--entity-type", "users", "--entity-name", opsUser, "--add-config", "SCRAM-SHA-512=[iterations=4096,password="+opsPassword+"]")

	endpoints := []*endpoint{saslPlaintext(t, dir), sslEndpoint(t, dir), saslSSL(t, dir)}
	managed := map[string]bool{}
	for _, e := range endpoints {
		for k := range e.keys {
			managed[k] = true
		}
	}
	// The package's other tests find the sidecars as TestMain started
	// them.
	t.Cleanup(func() { restartSidecars(t, managed, saslPlaintextKeys(), endpoints[0].root) })

	for _, e := range endpoints {
		t.Run(e.protocol, func(t *testing.T) {
			restartSidecars(t, managed, e.keys, e.root)
			t.Cleanup(func() { removeMirror(t, e) })
			// SCRAM credentials reach the broker through its metadata
			// log, and the SSL principal needs no user: wait until
			// opsPrincipal is in.
			wait.For(t, 30*time.Second, opsPrincipal+" to connect", func() bool { return cli(t, e.ops, "--list").Code == 0 })
			createSourceTopic(t, e.topic())
			// opsPrincipal holds every operation on another mirror: the
			// ACLs are per mirror.
			other := e.mirror() + "-other"
			mustCLI(t, e.root, "--add-acl", "--cluster-mirror", other, "--operation", "All", "--allow-principal", opsPrincipal)
			defer mustCLI(t, e.root, "--remove-acl", "--cluster-mirror", other, "--allow-principal", opsPrincipal)
			for _, c := range apiChecks {
				// The checks build on each other: stop at the first
				// failure.
				if !t.Run(c.api, func(t *testing.T) { check(t, e, c) }) {
					t.FailNow()
				}
			}
		})
	}
}

// removeMirror deletes the endpoint's mirror if a failed check left it,
// so that the package's other tests start without it.
func removeMirror(t *testing.T, e *endpoint) {
	t.Helper()
	if !slices.Contains(listed(t, e.root), e.mirror()) {
		return
	}
	cli(t, e.root, "--stop", "--topics", ".*", "--mirror", e.mirror())
	wait.For(t, time.Minute, "the left mirror "+e.mirror()+" to be deleted", func() bool {
		return cli(t, e.root, "--delete", "--mirror", e.mirror()).Code == 0
	})
}

// check runs c through e: refused without credentials, denied without the
// ACL, neither changing anything; then allowed with it.
func check(t *testing.T, e *endpoint, c apiCheck) {
	before := snapshot(t, e)
	for _, what := range slices.Sorted(maps.Keys(e.refused)) {
		r := c.call(t, e, e.refused[what])
		if r.Code != 1 || r.Stdout != "" || strings.Contains(r.Stderr, "CLUSTER_AUTHORIZATION_FAILED") {
			t.Fatalf("a client with %s: exit %d, stdout %q, stderr %q; want it refused before any request is served", what, r.Code, r.Stdout, r.Stderr)
		}
	}
	r := c.call(t, e, e.ops)
	if c.denied != nil {
		c.denied(t, e, r)
	} else {
		denied(t, opsPrincipal+" without the ACL", r)
	}
	if after := snapshot(t, e); after != before {
		t.Fatalf("the refused calls changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	res := c.resource(e)
	mustCLI(t, e.root, append(append([]string{"--add-acl"}, res...), "--operation", c.op, "--allow-principal", opsPrincipal)...)
	r = c.call(t, e, e.ops)
	mustCLI(t, e.root, append(append([]string{"--remove-acl"}, res...), "--allow-principal", opsPrincipal)...)
	c.ok(t, e, r)
}

// snapshot returns what the super user lists and describes: the mirrors,
// each one's configs and partition states, and every ACL.
func snapshot(t *testing.T, e *endpoint) string {
	t.Helper()
	var b strings.Builder
	for _, name := range listed(t, e.root) {
		m, ok := described(t, e.root, name)
		if !ok {
			t.Fatalf("the super user cannot describe %s", name)
		}
		fmt.Fprintf(&b, "mirror %s source %s\n", name, m.SourceBootstrap)
		for _, c := range m.Configs {
			fmt.Fprintf(&b, "  config %s=%s\n", c.Name, deref(c.Value))
		}
		for _, tp := range m.Topics {
			for _, p := range tp.Partitions {
				fmt.Fprintf(&b, "  %s-%d %s\n", tp.TopicName, p.PartitionIndex, p.State)
			}
		}
	}
	b.WriteString(mustCLI(t, e.root, "--list-acls"))
	return b.String()
}

// described returns the mirror as cfg's principal describes it.
func described(t *testing.T, cfg, mirror string) (protocol.DescribedMirror, bool) {
	t.Helper()
	r := cli(t, cfg, "--describe", "--mirror", mirror, "--json")
	var resp protocol.DescribeClusterMirrorsResponse
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &resp) != nil || len(resp.Mirrors) != 1 {
		return protocol.DescribedMirror{}, false
	}
	return resp.Mirrors[0], true
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// describeConfigs sends DescribeConfigs for the endpoint's mirror with the
// security of a command config, as kafka-cluster-mirrors would connect,
// and returns the outcome as a CLI run would print it: the configs as
// key=value lines, or an error and exit code 1.
func describeConfigs(t *testing.T, e *endpoint, commandConfig string) cliResult {
	t.Helper()
	opts := clientOpts(t, commandConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, env.Sidecars.Sidecars()[0].AdminAddr, opts...)
	if err != nil {
		return cliResult{Code: 1, Stderr: "Error: " + err.Error() + "\n"}
	}
	defer c.Close()
	req := &protocol.DescribeConfigsRequest{Resources: []protocol.DescribeConfigsResource{
		{ResourceType: protocol.ResourceTypeClusterMirror, ResourceName: e.mirror()},
	}}
	req.SetVersion(4)
	resp, err := c.Do(ctx, req)
	if err != nil {
		return cliResult{Code: 1, Stderr: "Error: " + err.Error() + "\n"}
	}
	dc, ok := resp.(*protocol.DescribeConfigsResponse)
	if !ok || len(dc.Results) != 1 {
		t.Fatalf("DescribeConfigs answered %+v", resp)
	}
	res := dc.Results[0]
	if res.ErrorCode != 0 {
		return cliResult{Code: 1, Stderr: fmt.Sprintf("Error: %v: %s\n", kerr.ErrorForCode(res.ErrorCode), deref(res.ErrorMessage))}
	}
	var b strings.Builder
	for _, c := range res.Configs {
		fmt.Fprintf(&b, "%s=%s\n", c.Name, deref(c.Value))
	}
	return cliResult{Stdout: b.String()}
}

// clientOpts returns the admin client options of a command config ("" for
// none), read as kafka-cluster-mirrors reads it.
func clientOpts(t *testing.T, commandConfig string) []protocol.ClientOpt {
	t.Helper()
	opts := []protocol.ClientOpt{protocol.DialTimeout(10 * time.Second)}
	if commandConfig == "" {
		return opts
	}
	props, err := properties.ReadFile(commandConfig)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, p := range props {
		values[p.Key] = p.Value
	}
	cc, err := security.ParseClientConfig(values, "")
	if err != nil {
		t.Fatal(err)
	}
	if cc.UsesTLS() {
		tc, err := cc.TLSConfig()
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, protocol.DialTLSConfig(tc))
	}
	if cc.UsesSASL() {
		m, err := cc.Mechanism()
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, protocol.SASLMechanism(m))
	}
	return opts
}

// restartSidecars sets keys in every sidecar's configuration, removes the
// other managed keys, restarts the sidecars and waits until the super
// user of root reaches them.
func restartSidecars(t *testing.T, managed map[string]bool, keys map[string]string, root string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, s := range env.Sidecars.Sidecars() {
		for k := range managed {
			var err error
			if v, ok := keys[k]; ok {
				_, err = s.SetConfig(k, v)
			} else {
				_, err = s.UnsetConfig(k)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, time.Minute, "the super user to reach the restarted sidecars", func() bool { return cli(t, root, "--list").Code == 0 })
}

// mirrorConfigFile writes the mirror config of the endpoints' mirrors.
func mirrorConfigFile(t *testing.T) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "mirror.properties", "bootstrap.servers="+env.Source.Bootstrap()+"\n")
}

// createSourceTopic creates a topic of two partitions with records on the
// source.
func createSourceTopic(t *testing.T, topic string) {
	t.Helper()
	src, err := env.Source.NewClient(testbed.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(src).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := src.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Append(nil, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// saslPlaintext is the endpoint TestMain starts with: SASL_PLAINTEXT,
// relayed to the destination's client listener (PLAIN and SCRAM-SHA-512).
func saslPlaintext(t *testing.T, dir string) *endpoint {
	base := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
	return &endpoint{
		protocol: "SASL_PLAINTEXT",
		keys:     saslPlaintextKeys(),
		root: writeFile(t, dir, "sp-root.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
			jaas("plain.PlainLoginModule", testbed.Admin.Name, testbed.Admin.Password)),
		ops: writeFile(t, dir, "sp-ops.properties", base+jaas("scram.ScramLoginModule", opsUser, opsPassword)),
		refused: map[string]string{
			"no credentials":   "",
			"a wrong password": writeFile(t, dir, "sp-wrong.properties", base+jaas("scram.ScramLoginModule", opsUser, "hunter2")),
		},
	}
}

// sslEndpoint is SSL with client certificates required: the sidecar's
// key store a PKCS12 file (openssl), the clients' PKCS12 and JKS
// (keytool) stores of the package's PKI, the principal the certificate's
// subject rewritten by sslMapping.
func sslEndpoint(t *testing.T, dir string) *endpoint {
	trust := "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=" + pki.CAFile + "\n"
	store := func(kind, file string) string {
		s := fmt.Sprintf("ssl.keystore.type=%s\nssl.keystore.location=%s\n", kind, file)
		if kind != "PEM" {
			s += "ssl.keystore.password=" + storePassword + "\nssl.key.password=" + storePassword + "\n"
		}
		return s
	}
	server := must(pki.IssuePKCS12("sidecar-admin", storePassword))(t)
	stranger := must(peerPKI.IssuePEM("Mirror-Ops"))(t)
	return &endpoint{
		protocol: "SSL",
		keys: map[string]string{
			"admin.security.protocol":           "SSL",
			"admin.ssl.keystore.type":           "PKCS12",
			"admin.ssl.keystore.location":       server,
			"admin.ssl.keystore.password":       storePassword,
			"admin.ssl.truststore.type":         "PEM",
			"admin.ssl.truststore.location":     pki.CAFile,
			"admin.ssl.client.auth":             "required",
			"admin.ssl.principal.mapping.rules": sslMapping,
			"admin.super.users":                 "User:" + testbed.Admin.Name,
		},
		root: writeFile(t, dir, "ssl-root.properties", trust+store("PKCS12", must(pki.IssuePKCS12("Admin", storePassword))(t))),
		ops:  writeFile(t, dir, "ssl-ops.properties", trust+store("JKS", must(pki.IssueJKS("Mirror-Ops", storePassword))(t))),
		refused: map[string]string{
			"no TLS":                      "",
			"no certificate":              writeFile(t, dir, "ssl-nocert.properties", trust),
			"a certificate of another CA": writeFile(t, dir, "ssl-stranger.properties", trust+store("PEM", stranger)),
		},
	}
}

// saslSSL is SASL_SSL with SCRAM-SHA-512, relayed over SASL_SSL to the
// destination's SCRAM listener (its certificate verified with the
// package's CA as destination.ssl.truststore).
func saslSSL(t *testing.T, dir string) *endpoint {
	trust := "ssl.truststore.type=PEM\nssl.truststore.location=" + pki.CAFile + "\n"
	base := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n" + trust
	return &endpoint{
		protocol: "SASL_SSL",
		keys: map[string]string{
			"admin.security.protocol":             "SASL_SSL",
			"admin.sasl.enabled.mechanisms":       "SCRAM-SHA-512",
			"admin.sasl.relay.bootstrap.servers":  env.Destination.ListenerBootstrap(testbed.ListenerSCRAM),
			"admin.sasl.relay.security.protocol":  "SASL_SSL",
			"destination.ssl.truststore.type":     "PEM",
			"destination.ssl.truststore.location": pki.CAFile,
			"admin.ssl.keystore.type":             "PEM",
			"admin.ssl.keystore.location":         must(pki.IssuePEM("sidecar-admin-pem"))(t),
			"admin.super.users":                   "User:" + testbed.Admin.Name,
		},
		root: writeFile(t, dir, "ss-root.properties", base+jaas("scram.ScramLoginModule", testbed.Admin.Name, testbed.Admin.Password)),
		ops:  writeFile(t, dir, "ss-ops.properties", base+jaas("scram.ScramLoginModule", opsUser, opsPassword)),
		refused: map[string]string{
			"TLS without SASL": writeFile(t, dir, "ss-tls.properties", "security.protocol=SSL\n"+trust),
			"SASL without TLS": writeFile(t, dir, "ss-plain.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
				jaas("scram.ScramLoginModule", opsUser, opsPassword)),
			"a wrong password": writeFile(t, dir, "ss-wrong.properties", base+jaas("scram.ScramLoginModule", opsUser, "hunter2")),
		},
	}
}

// must returns a value or fails the test with the error.
func must(v string, err error) func(*testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestRefusedMirrorSettings creates mirrors whose configs the sidecar
// refuses: settings it does not support, refused at validation, make
// kafka-cluster-mirrors exit 2 (as its own --command-config settings do);
// a source it cannot reach exits 1. None creates a mirror.
func TestRefusedMirrorSettings(t *testing.T) {
	dir := t.TempDir()
	root := writeFile(t, dir, "root.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		jaas("plain.PlainLoginModule", testbed.Admin.Name, testbed.Admin.Password))
	before := strings.Join(listed(t, root), ",")
	bootstrap := "bootstrap.servers=" + env.Source.Bootstrap() + "\n"
	for _, tc := range []struct {
		name, config string
		code         int
		want         string // in stderr
	}{
		{"Kerberos", bootstrap + "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n" +
			jaas("plain.PlainLoginModule", "u", "p"), 2, `sasl.mechanism: "GSSAPI" (Kerberos) is not supported`},
		{"a key store type", bootstrap + "security.protocol=SSL\nssl.keystore.type=BCFKS\nssl.keystore.location=/x\n", 2, "ssl.keystore.type"},
		{"a consumer group", bootstrap + "group.id=g\n", 2, "group.id is not supported"},
		{"an unknown key", bootstrap + "ssl.keystore.locaton=/x\n", 2, "ssl.keystore.locaton"},
		{"an unreachable source", "bootstrap.servers=127.0.0.1:1\n", 1, "cannot reach the source cluster at 127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, root, "--create", "--mirror", "refused", "--mirror-config", writeFile(t, t.TempDir(), "mirror.properties", tc.config))
			if r.Code != tc.code || r.Stdout != "" || !strings.HasPrefix(r.Stderr, "Error: INVALID_CONFIG: ") || !strings.Contains(r.Stderr, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and INVALID_CONFIG naming %q", r.Code, r.Stdout, r.Stderr, tc.code, tc.want)
			}
			if after := strings.Join(listed(t, root), ","); after != before {
				t.Fatalf("a refused create changed the mirrors from %q to %q", before, after)
			}
		})
	}
}
