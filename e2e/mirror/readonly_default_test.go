package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// reveal the value of that key, so the sidecars cannot tell whether a
// topic without ACLs is open to everyone: starting one is refused with a
// message naming readonly.allow.everyone.if.no.acl.found, and nothing is
// created on the destination, rather than a DENY WRITE that would lock
// every consumer out. A topic with an ACL of its own (a READ ACL for
// alice) needs no such answer: it starts with the DENY WRITE alone, alice
// reads every record with kcat and cannot write.
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

	const mirror, open, withACL, n = "rodef", "rodef-open", "rodef-alice", 40
	const interval = 5 * time.Second
	for _, topic := range []string{open, withACL} {
		createSourceTopic(t, topic, 1, nil)
		produceIDs(t, topic, n)
	}
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		syncedMirrorConfig(t, map[string]string{"mirror.metadata.refresh.interval.ms": strconv.Itoa(int(interval.Milliseconds()))}))

	// No ACL applies to the topic: refused, naming the key, nothing made.
	r := cli(t, "--start", "--topics", open, "--mirror", mirror)
	if r.Code == 0 || !strings.Contains(r.Stderr, key+"=true or =false") || !strings.Contains(r.Stderr, "does not reveal its value") {
		t.Fatalf("--start of a topic without ACLs: exit %d\nstdout: %s\nstderr: %s\nwant a refusal naming %s", r.Code, r.Stdout, r.Stderr, key)
	}
	t.Logf("the refusal: %s", strings.TrimSpace(r.Stderr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, env.Destination, testbed.Admin))
	if td, err := adm.ListTopics(ctx, open); err != nil || td.Has(open) {
		t.Fatalf("the refused topic exists on the destination (%v, %v)", td.Has(open), err)
	}
	denyWrite := literalTopicACL(open, "User:*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny)
	if aclsOn(t, env.Destination)[denyWrite] {
		t.Fatalf("the refused topic got a DENY WRITE")
	}

	// alice may read: the ACL decides, the start needs no answer.
	aliceRead := literalTopicACL(withACL, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	createACLsEverywhere(t, aliceRead)
	mustCLI(t, "--start", "--topics", withACL, "--mirror", mirror)
	waitCaughtUp(t, mirror, withACL, 2*time.Minute)
	dst := aclsOn(t, env.Destination)
	if !dst[literalTopicACL(withACL, "User:*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny)] ||
		dst[literalTopicACL(withACL, "User:*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow)] {
		t.Fatalf("ACLs of %s: want the DENY WRITE for User:* and no ALLOW ALL: %v", withACL, dst)
	}
	readOnlyForAlice := func(topic string, records int) {
		t.Helper()
		if ok, out := kcatReads(t, topic, records); !ok {
			t.Fatalf("kcat as alice does not read the %d records of %s:\n%s", records, topic, out)
		}
		if err := aliceWrite(t, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice's write to %s returned %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
		}
	}
	readOnlyForAlice(withACL, n)

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
	readOnlyForAlice("new-x", n)
	mustCLI(t, "--stop", "--topics", "new-x", "--mirror", mirror)
}
