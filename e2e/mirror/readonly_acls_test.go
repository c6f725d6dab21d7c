package mirror

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// aliceFetch fetches partition 0 of topic from offset 0 on the destination
// as alice with a raw Fetch request to the partition leader (no consumer
// machinery that retries or hides an authorization error). It returns the
// partition's error, or an error when no record came back.
func aliceFetch(t *testing.T, topic string) error {
	t.Helper()
	leader, id := leaderOf(t, env.Destination, topic, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = 0, 0, -1, -1, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, newClient(t, env.Destination, testbed.Alice).Broker(int(leader)))
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errors.New("fetch response without the partition")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return err
	}
	if len(p.RecordBatches) == 0 {
		return errors.New("fetch returned no records")
	}
	return nil
}

// kcatAs runs kcat against the destination as u with a timeout.
func kcatAs(t *testing.T, u testbed.User, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", append(env.Destination.KcatArgs(u), args...)...).CombinedOutput()
	return string(out), err
}

// kcatReads reports whether kcat, as alice, reads the n records of
// partition 0 of topic on the destination.
func kcatReads(t *testing.T, topic string, n int) (bool, string) {
	t.Helper()
	out, err := kcatAs(t, testbed.Alice, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\n")
	if err != nil {
		return false, err.Error() + ": " + out
	}
	return strings.Count(out, "id-") == n, out
}

// kcatDenied reports whether kcat's metadata listing, as alice, shows topic
// with TOPIC_AUTHORIZATION_FAILED.
func kcatDenied(t *testing.T, topic string) (bool, string) {
	t.Helper()
	out, _ := kcatAs(t, testbed.Alice, "-L", "-t", topic)
	return strings.Contains(strings.ToLower(out), "authorization failed"), out
}

// TestReadOnlyAllowAllFollowsACLs checks the ALLOW ALL for User:* that a
// mirror topic gets beside its DENY WRITE on a destination that allows
// everyone when no ACL matches (DESIGN D4). Once an operator restricts
// reading with an ACL of their own ("only alice may read", then "only bob
// may read", then a prefixed ACL), the metadata sync removes the sidecars'
// ALLOW ALL so that the restriction holds: alice reads when named and is
// refused when not, and writes stay denied. Once no other ACL matches, the
// ALLOW ALL comes back and everyone reads again; --stop then removes both
// ACLs, which shows that the recorded set followed the changes.
func TestReadOnlyAllowAllFollowsACLs(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, n = "roacl", "roacl", 20
	createSourceTopic(t, topic, 1, nil)
	produceIDs(t, topic, n)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		syncedMirrorConfig(t, map[string]string{"mirror.metadata.refresh.interval.ms": "1000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	const (
		read  = kmsg.ACLOperationRead
		write = kmsg.ACLOperationWrite
		allow = kmsg.ACLPermissionTypeAllow
		deny  = kmsg.ACLPermissionTypeDeny
	)
	denyWrite := literalTopicACL(topic, "User:*", write, deny)
	allowAll := literalTopicACL(topic, "User:*", kmsg.ACLOperationAll, allow)
	if m := missingACLs(aclsOn(t, env.Destination), denyWrite, allowAll); len(m) > 0 {
		t.Fatalf("the started mirror topic lacks %v on a destination that allows everyone", m)
	}
	readable := func(what string) {
		t.Helper()
		wait.For(t, 30*time.Second, "alice to read "+what, func() bool { return aliceFetch(t, topic) == nil })
		if ok, out := kcatReads(t, topic, n); !ok {
			t.Fatalf("kcat as alice does not read the %d records %s:\n%s", n, what, out)
		}
		if err := aliceWrite(t, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice's write %s returned %v, want TOPIC_AUTHORIZATION_FAILED", what, err)
		}
	}
	readable("with the sidecars' ALLOW ALL")

	// Only alice may read: the ALLOW ALL goes.
	aliceRead := literalTopicACL(topic, "User:alice", read, allow)
	createACLs(t, env.Destination, aliceRead)
	wait.For(t, 30*time.Second, "the sidecars' ALLOW ALL to go", func() bool { return !aclsOn(t, env.Destination)[allowAll] })
	if m := missingACLs(aclsOn(t, env.Destination), denyWrite, aliceRead); len(m) > 0 {
		t.Fatalf("ACLs gone from the destination: %v", m)
	}
	readable("with ALLOW READ for alice")

	// Only bob may read: alice, like every user the ACLs do not name, is
	// refused.
	bobRead := literalTopicACL(topic, "User:bob", read, allow)
	createACLs(t, env.Destination, bobRead)
	deleteACLs(t, env.Destination, aliceRead)
	var fetchErr error
	wait.For(t, 30*time.Second, "alice's read to be refused", func() bool {
		fetchErr = aliceFetch(t, topic)
		return fetchErr != nil
	})
	if !errors.Is(fetchErr, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's fetch returned %v, want TOPIC_AUTHORIZATION_FAILED", fetchErr)
	}
	if ok, out := kcatDenied(t, topic); !ok {
		t.Fatalf("kcat as alice is not refused the topic's metadata:\n%s", out)
	}
	if err := aliceWrite(t, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's write returned %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	time.Sleep(3 * time.Second) // three sync rounds: the ALLOW ALL must stay away
	if dst := aclsOn(t, env.Destination); dst[allowAll] || !dst[denyWrite] {
		t.Fatalf("with bob's ACL: ALLOW ALL %v (want false), DENY WRITE %v (want true)", dst[allowAll], dst[denyWrite])
	}

	// A prefixed ACL matching the topic restricts it as well.
	prefixed := aclEntry{kmsg.ACLResourceTypeTopic, "roac", kmsg.ACLResourcePatternTypePrefixed, "User:alice", "*", read, allow}
	createACLs(t, env.Destination, prefixed)
	deleteACLs(t, env.Destination, bobRead)
	readable("with a prefixed ALLOW READ for alice")
	time.Sleep(3 * time.Second)
	if dst := aclsOn(t, env.Destination); dst[allowAll] {
		t.Fatalf("the ALLOW ALL came back while a prefixed ACL matches the topic")
	}

	// No other ACL any more: the ALLOW ALL comes back and everyone reads.
	deleteACLs(t, env.Destination, prefixed)
	wait.For(t, 30*time.Second, "the sidecars' ALLOW ALL to come back", func() bool { return aclsOn(t, env.Destination)[allowAll] })
	readable("with the ALLOW ALL back")
	if ok, out := kcatDenied(t, topic); ok {
		t.Fatalf("kcat as alice is refused the topic's metadata with the ALLOW ALL back:\n%s", out)
	}
	if lines := sidecarLogLines(t, "read-only ACLs: removed the ALLOW ALL", `"topic": "`+topic+`"`); len(lines) == 0 {
		t.Errorf("no sidecar logged the removal of the ALLOW ALL of %s", topic)
	}
	if lines := sidecarLogLines(t, "read-only ACLs: added the ALLOW ALL", `"topic": "`+topic+`"`); len(lines) == 0 {
		t.Errorf("no sidecar logged the ALLOW ALL of %s coming back", topic)
	}

	// --stop removes exactly the recorded ACLs: both.
	mustCLI(t, "--stop", "--topics", topic, "--mirror", mirror)
	dst := aclsOn(t, env.Destination)
	if dst[allowAll] || dst[denyWrite] {
		t.Fatalf("after --stop: ALLOW ALL %v, DENY WRITE %v; want neither", dst[allowAll], dst[denyWrite])
	}
	wait.For(t, 30*time.Second, "alice to write to the stopped topic", func() bool { return aliceWrite(t, topic) == nil })
}
