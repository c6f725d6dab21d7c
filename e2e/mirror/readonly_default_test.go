package mirror

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// restartSidecars stops every sidecar, edits its configuration file and
// starts them all again, waiting until each is healthy and the CLI gets
// answers.
func restartSidecars(t *testing.T, edit func(*testbed.Sidecar) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, s := range env.Sidecars.Sidecars() {
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("stop sidecar %d: %v", s.BrokerID, err)
		}
		if err := edit(s); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(env.Sidecars.Sidecars()))
	for i, s := range env.Sidecars.Sidecars() {
		wg.Go(func() { errs[i] = s.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start the sidecars: %v", err)
	}
	wait.For(t, time.Minute, "the sidecars to answer --list", func() bool { return cli(t, "--list").Code == 0 })
}

// createACLsEverywhere creates ACLs on the destination and waits until
// every broker lists them: each broker learns ACLs from the metadata log on
// its own, and the sidecars may ask any of them.
func createACLsEverywhere(t *testing.T, acls ...aclEntry) {
	t.Helper()
	createACLs(t, env.Destination, acls...)
	cl := newClient(t, env.Destination, testbed.Admin)
	for _, n := range env.Destination.Nodes() {
		wait.For(t, 30*time.Second, fmt.Sprintf("broker %d to list the new ACLs", n.ID), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := req.RequestWith(ctx, cl.Broker(int(n.ID)))
			if err != nil || resp.ErrorCode != 0 {
				return false
			}
			have := map[aclEntry]bool{}
			for _, r := range resp.Resources {
				for _, a := range r.ACLs {
					have[aclEntry{r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType}] = true
				}
			}
			return len(missingACLs(have, acls...)) == 0
		})
	}
}

// TestReadOnlyDefaultConfig runs the sidecars with no readonly.* key, as a
// new user would, beside destination brokers whose server.properties set
// allow.everyone.if.no.acl.found=true (the common setup). Kafka does not
// reveal the value of that key, so the sidecar probes the authorizer as a
// temporary SCRAM user: a topic without ACLs of its own is mirrored with
// the DENY WRITE and the ALLOW ALL for User:*, and alice, whom no ACL names
// (SCRAM credentials made with kafka-configs, and the bed's PLAIN user for
// kcat), reads every record with kcat and cannot write; no probe user is
// left behind. A topic with an ACL of its
// own (a READ ACL for alice) needs no answer: it starts with the DENY
// WRITE alone, and the same holds.
//
// Then runbook 2's stop and a later start: after --stop --topics '.*' the
// exclude list holds .*; --start --topics 'new-.*' says it removed that
// exclude pattern, and a source topic new-x created afterwards (with a
// prefixed READ ACL for alice on new-) is discovered within two refresh
// intervals and read by alice.
func TestReadOnlyDefaultConfig(t *testing.T) {
	dumpLogs(t)
	const key = "readonly.allow.everyone.if.no.acl.found"
	restartSidecars(t, func(s *testbed.Sidecar) error { _, err := s.UnsetConfig(key); return err })
	t.Cleanup(func() {
		restartSidecars(t, func(s *testbed.Sidecar) error { _, err := s.SetConfig(key, "true"); return err })
	})
	scramAlice(t, env.Destination)

	const mirror, open, withACL, n = "rodef", "rodef-open", "rodef-alice", 40
	const interval = 5 * time.Second
	for _, topic := range []string{open, withACL} {
		createSourceTopic(t, topic, 1, nil)
		produceIDs(t, topic, n)
	}
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		syncedMirrorConfig(t, map[string]string{"mirror.metadata.refresh.interval.ms": strconv.Itoa(int(interval.Milliseconds()))}))

	// No ACL applies to the topic: the probe tells that the brokers allow
	// everyone, so the DENY WRITE gets the ALLOW ALL beside it.
	mustCLI(t, "--start", "--topics", open, "--mirror", mirror)
	waitCaughtUp(t, mirror, open, 2*time.Minute)
	dst := aclsOn(t, env.Destination)
	if !dst[literalTopicACL(open, "User:*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny)] ||
		!dst[literalTopicACL(open, "User:*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow)] {
		t.Fatalf("ACLs of %s: want the DENY WRITE and the ALLOW ALL for User:*: %v", open, dst)
	}
	aliceReadOnly(t, env.Destination, open, n)
	if !sidecarLogged(env.Sidecars, "allow.everyone.if.no.acl.found behaves as true") {
		t.Fatalf("no sidecar logged the probe's answer (true)")
	}
	noProbeUsers(t, env.Destination)

	// alice may read: the ACL decides, the start needs no answer.
	aliceRead := literalTopicACL(withACL, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	createACLsEverywhere(t, aliceRead)
	mustCLI(t, "--start", "--topics", withACL, "--mirror", mirror)
	waitCaughtUp(t, mirror, withACL, 2*time.Minute)
	dst = aclsOn(t, env.Destination)
	if !dst[literalTopicACL(withACL, "User:*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny)] ||
		dst[literalTopicACL(withACL, "User:*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow)] {
		t.Fatalf("ACLs of %s: want the DENY WRITE for User:* and no ALLOW ALL: %v", withACL, dst)
	}
	aliceReadOnly(t, env.Destination, withACL, n)

	// Runbook 2, then new topics.
	mustCLI(t, "--stop", "--topics", ".*", "--mirror", mirror)
	out := mustCLI(t, "--start", "--topics", "new-.*", "--mirror", mirror)
	if !strings.Contains(out, `exclude pattern ".*" shadowed include pattern(s) "new-.*"`) {
		t.Fatalf("--start --topics 'new-.*' after --stop --topics '.*' printed:\n%s\nwant a note on the removed exclude pattern", out)
	}
	t.Logf("the start's note: %s", strings.TrimSpace(out))
	createACLsEverywhere(t, aclEntry{kmsg.ACLResourceTypeTopic, "new-", kmsg.ACLResourcePatternTypePrefixed, "User:alice", "*",
		kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow})
	createSourceTopic(t, "new-x", 1, nil)
	created := time.Now()
	produceIDs(t, "new-x", n)
	var found time.Duration
	wait.For(t, time.Minute, "new-x to be discovered", func() bool {
		for _, tp := range describe(t, mirror).Topics {
			if tp.TopicName == "new-x" {
				found = time.Since(created)
				return true
			}
		}
		return false
	})
	t.Logf("new-x discovered %v after its creation (refresh interval %v)", found.Round(100*time.Millisecond), interval)
	if found > 2*interval {
		t.Fatalf("new-x discovered after %v, more than two refresh intervals (%v)", found, 2*interval)
	}
	waitCaughtUp(t, mirror, "new-x", 2*time.Minute)
	aliceReadOnly(t, env.Destination, "new-x", n)
	mustCLI(t, "--stop", "--topics", "new-x", "--mirror", mirror)
}

// TestReadOnlyDefaultConfigDenying is TestReadOnlyDefaultConfig on a
// destination of its own (one broker, one sidecar) whose server.properties
// set allow.everyone.if.no.acl.found=false, with a sidecar that has no
// readonly.* key: alice, with a READ ACL on one mirrored topic, reads every
// record of it with kcat and cannot write; a mirrored topic without ACLs
// stays closed to her, as it was before (the probe tells the brokers deny,
// so it gets the DENY WRITE alone), and no probe user is left behind.
func TestReadOnlyDefaultConfigDenying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dest, err := testbed.StartCluster(ctx, env.Dist, t.TempDir(), testbed.ClusterOptions{Name: "denying-destination", Nodes: 1, HeapMB: 384,
		SASL: true, SCRAM: true, Authorizer: true, BrokerConfig: map[string]string{"allow.everyone.if.no.acl.found": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dest.Close)
	g, err := testbed.StartSidecars(ctx, env.Bin.Sidemirror, dest, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(dest.LogTails(60) + g.LogTails(80))
		}
	})
	// The testbed states the key to match the brokers: removed, as a new
	// user runs.
	s := g.Sidecars()[0]
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UnsetConfig("readonly.allow.everyone.if.no.acl.found"); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	at := func(args ...string) string {
		t.Helper()
		r := cliAt(t, g.AdminBootstrap(), args...)
		if r.Code != 0 {
			t.Fatalf("kafka-cluster-mirrors %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	wait.For(t, time.Minute, "the sidecar to answer --list", func() bool { return cliAt(t, g.AdminBootstrap(), "--list").Code == 0 })
	scramAlice(t, dest)

	const mirror, withACL, closed, n = "rodeny", "rodeny-alice", "rodeny-closed", 40
	for _, topic := range []string{withACL, closed} {
		createSourceTopic(t, topic, 1, nil)
		produceIDs(t, topic, n)
	}
	createACLs(t, dest, literalTopicACL(withACL, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	at("--create", "--mirror", mirror, "--mirror-config", syncedMirrorConfig(t, nil))
	at("--start", "--topics", withACL, "--mirror", mirror)
	at("--start", "--topics", closed, "--mirror", mirror)
	for _, topic := range []string{withACL, closed} {
		wait.For(t, 2*time.Minute, topic+" mirrored", func() bool { return endOffsets(t, dest, topic)[0] == n })
	}
	aliceReadOnly(t, dest, withACL, n)

	acls := aclsOn(t, dest)
	if !acls[literalTopicACL(closed, "User:*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny)] ||
		acls[literalTopicACL(closed, "User:*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow)] {
		t.Fatalf("ACLs of %s: want the DENY WRITE for User:* and no ALLOW ALL: %v", closed, acls)
	}
	if out, _ := kcatOn(t, dest, "", "-L", "-t", closed); !strings.Contains(strings.ToLower(out), "authorization failed") {
		t.Fatalf("kcat -L as alice for %s, a topic no ACL opens on a denying cluster:\n%s\nwant an authorization failure", closed, out)
	}
	if !sidecarLogged(g, "allow.everyone.if.no.acl.found behaves as false") {
		t.Fatalf("the sidecar did not log the probe's answer (false)")
	}
	noProbeUsers(t, dest)
}

// scramAlice gives alice SCRAM-SHA-512 credentials on c with Kafka's own
// kafka-configs.sh (kafka.admin.ConfigCommand), as the admin, and waits
// until she logs in with them (credentials reach the brokers through the
// metadata log). She is the same principal, User:alice, as the bed's PLAIN
// alice, which kcat logs in as: kcat's librdkafka (2.0.2) fails SCRAM
// against Kafka 4 brokers (fixed in librdkafka 2.6.1).
func scramAlice(t *testing.T, c *testbed.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := filepath.Join(t.TempDir(), "admin.properties")
	if err := c.WriteClientProperties(admin, testbed.Admin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "java", "-cp", env.Dist.Classpath(), "kafka.admin.ConfigCommand",
		"--bootstrap-server", c.Bootstrap(), "--command-config", admin,
		"--alter", "--entity-type", "users", "--entity-name", testbed.Alice.Name,
		"--add-config", "SCRAM-SHA-512=[iterations=4096,password="+testbed.Alice.Password+"]")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kafka-configs: %v\n%s", err, out)
	}
	wait.For(t, 30*time.Second, "alice to log in with SCRAM-SHA-512", func() bool {
		cl := scramAliceClient(t, c)
		defer cl.Close()
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		return err == nil
	})
}

// scramAliceClient returns a franz-go client for c as alice with
// SCRAM-SHA-512.
func scramAliceClient(t *testing.T, c *testbed.Cluster, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
		kgo.SASL(scram.Auth{User: testbed.Alice.Name, Pass: testbed.Alice.Password}.AsSha512Mechanism())}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// kcatOn runs kcat against c as alice, with stdin as its input.
func kcatOn(t *testing.T, c *testbed.Cluster, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", append(c.KcatArgs(testbed.Alice), args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// aliceReadOnly checks that alice reads the n records of partition 0 of
// topic on c, with kcat and logged in with SCRAM, and that her writes are
// refused, to kcat and with SCRAM; the topic still ends at n.
func aliceReadOnly(t *testing.T, c *testbed.Cluster, topic string, n int) {
	t.Helper()
	out, err := kcatOn(t, c, "", "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	if err != nil || strings.Count(out, "id-") != n {
		t.Fatalf("kcat as alice read %d of the %d records of %s (%v):\n%s", strings.Count(out, "id-"), n, topic, err, out)
	}
	out, _ = kcatOn(t, c, "written by alice\n", "-P", "-t", topic, "-p", "0", "-X", "message.timeout.ms=10000")
	if !strings.Contains(strings.ToLower(out), "authorization failed") {
		t.Fatalf("kcat -P as alice to %s:\n%s\nwant an authorization failure", topic, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Not idempotent: a denying cluster refuses alice IDEMPOTENT_WRITE on
	// the CLUSTER before her write reaches the topic.
	cl := scramAliceClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.DisableIdempotentWrite(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	read := 0
	for read < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 && ctx.Err() == nil {
			t.Fatalf("alice (SCRAM) reading %s: %v", topic, errs[0].Err)
		}
		read += fs.NumRecords()
	}
	if read != n {
		t.Fatalf("alice (SCRAM) read %d of the %d records of %s", read, n, topic)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("written by alice")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's (SCRAM) write to %s returned %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
	}
	if got := endOffsets(t, c, topic)[0]; got != int64(n) {
		t.Fatalf("%s ends at %d after alice's writes, want %d", topic, got, n)
	}
}

// sidecarLogged reports whether a sidecar of g logged a line containing s.
func sidecarLogged(g *testbed.SidecarGroup, s string) bool {
	for _, sc := range g.Sidecars() {
		if data, err := os.ReadFile(sc.LogPath()); err == nil && strings.Contains(string(data), s) {
			return true
		}
	}
	return false
}

// noProbeUsers fails the test if c has a SCRAM user of the sidecars'
// authorizer probe: each probe deletes its user.
func noProbeUsers(t *testing.T, c *testbed.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	users, err := kadm.NewClient(newClient(t, c, testbed.Admin)).DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for u := range users {
		if strings.HasPrefix(u, "__sidemirror-probe-") {
			t.Errorf("the probe user %s is left on %s", u, c.Name())
		}
	}
}
