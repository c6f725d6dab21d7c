package mirror

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// syncedMirrorConfig is the mirror config of the metadata sync tests: a
// sync every 2 s, plus extra settings.
func syncedMirrorConfig(t *testing.T, extra map[string]string) string {
	t.Helper()
	cfg := map[string]string{"mirror.metadata.refresh.interval.ms": "2000"}
	maps.Copy(cfg, extra)
	return mirrorConfigFile(t, cfg)
}

// topicConfig returns a topic config's value on c ("" when unset).
func topicConfig(t *testing.T, c *testbed.Cluster, topic, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(newClient(t, c, testbed.Admin)).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe configs of %s on %s: %v", topic, c.Name(), err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatalf("describe configs of %s on %s: %v", topic, c.Name(), err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == name {
			return cfg.MaybeValue()
		}
	}
	return ""
}

// alterSourceTopicConfig sets a config of a source topic.
func alterSourceTopicConfig(t *testing.T, topic, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).AlterTopicConfigs(ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic)
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("alter %s of source topic %s: %v", name, topic, err)
	}
}

// TestConfigSync changes source topic configs and expects the destination
// to follow, except for the forced compression.type=producer.
func TestConfigSync(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "cfgsync", "cfgsync"
	createSourceTopic(t, topic, 2, nil)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", syncedMirrorConfig(t, nil))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	wait.For(t, time.Minute, "the destination topic", func() bool { return len(endOffsets(t, env.Destination, topic)) == 2 })

	alterSourceTopicConfig(t, topic, "retention.ms", "123456789")
	alterSourceTopicConfig(t, topic, "compression.type", "gzip")
	wait.For(t, 30*time.Second, "retention.ms on the destination", func() bool {
		return topicConfig(t, env.Destination, topic, "retention.ms") == "123456789"
	})
	if got := topicConfig(t, env.Destination, topic, "compression.type"); got != "producer" {
		t.Fatalf("destination compression.type = %q, want producer (forced, never synced)", got)
	}
	alterSourceTopicConfig(t, topic, "retention.ms", "223456789")
	wait.For(t, 30*time.Second, "the changed retention.ms on the destination", func() bool {
		return topicConfig(t, env.Destination, topic, "retention.ms") == "223456789"
	})
	if got := topicConfig(t, env.Destination, topic, "compression.type"); got != "producer" {
		t.Fatalf("destination compression.type = %q, want producer (forced, never synced)", got)
	}
}

// TestPartitionExpansion adds partitions to a mirrored source topic: the
// destination gets them and they are mirrored at identical offsets.
func TestPartitionExpansion(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "expand", "expand"
	createSourceTopic(t, topic, 2, nil)
	produceVariety(t, env.Source, topic, 2_000, 11)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", syncedMirrorConfig(t, nil))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).UpdatePartitions(ctx, 5, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("add source partitions: %v", err)
	}
	wait.For(t, 30*time.Second, "5 partitions on the destination", func() bool { return len(endOffsets(t, env.Destination, topic)) == 5 })
	produceVariety(t, env.Source, topic, 5_000, 12)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	src := endOffsets(t, env.Source, topic)
	if src[4] == 0 {
		t.Fatalf("no records in the new partition 4 (end offsets %v): the test proves nothing", src)
	}
	if n := compareAll(t, topic, 5); n != 7_000 {
		t.Fatalf("compared %d records, want 7000", n)
	}
}

// groupOffsets returns a group's committed offsets of topic on c.
func groupOffsets(t *testing.T, c *testbed.Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(newClient(t, c, testbed.Admin)).FetchOffsets(ctx, group)
	out := map[int32]int64{}
	if err != nil {
		return out // not there yet (GROUP_ID_NOT_FOUND and the like)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// commitOffsets commits offsets for group on a topic of c with an admin
// commit.
func commitOffsets(t *testing.T, c *testbed.Cluster, group, topic string, offsets map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(newClient(t, c, testbed.Admin)).CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit offsets of %s on %s: %v", group, c.Name(), err)
	}
}

// produceIDs produces n records with the values id-0 ... id-(n-1).
func produceIDs(t *testing.T, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, env.Source, testbed.Admin)
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "id-%d", i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestGroupOffsetSync consumes half a topic on the source with group g1,
// waits for the group's offsets on the destination, fails over (--stop)
// and consumes the rest from the destination with kcat in group g1: every
// record must be consumed exactly once across both clusters.
func TestGroupOffsetSync(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, group, total = "groupsync", "groupsync", "g1", 3_000
	createSourceTopic(t, topic, 3, nil)
	produceIDs(t, topic, total)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config", syncedMirrorConfig(t, nil))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	consumer := newClient(t, env.Source, testbed.Admin, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxBytes(4096), kgo.FetchMaxPartitionBytes(1024))
	consumed := 0
	for consumed < total/2 {
		fs := consumer.PollRecords(ctx, 100)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming on the source: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			consumed++
		})
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit on the source: %v", err)
	}
	consumer.Close() // leaves the group
	t.Logf("consumed %d records on the source", consumed)
	if consumed >= total {
		t.Fatalf("consumed all %d records on the source: the test proves nothing", consumed)
	}

	want := groupOffsets(t, env.Source, group, topic)
	wait.For(t, 30*time.Second, "the group offsets on the destination", func() bool {
		got := groupOffsets(t, env.Destination, group, topic)
		return maps.Equal(got, want)
	})
	mustCLI(t, "--stop", "--topics", topic, "--mirror", mirror)

	kctx, kcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer kcancel()
	out, err := env.Destination.Kcat(kctx, testbed.Admin, "-G", group, "-X", "auto.offset.reset=earliest",
		"-e", "-q", "-f", "%s\n", topic)
	if err != nil {
		t.Fatal(err)
	}
	fromDest := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			seen[line]++
			fromDest++
		}
	}
	t.Logf("consumed %d records on the destination", fromDest)
	for i := range total {
		id := fmt.Sprintf("id-%d", i)
		if n := seen[id]; n != 1 {
			t.Errorf("%s consumed %d times, want exactly once", id, n)
		}
	}
	if len(seen) != total {
		t.Errorf("%d distinct records consumed, want %d", len(seen), total)
	}
}

// TestActiveGroupNotOverwritten: a group with a live consumer on the
// destination keeps its own offsets, and an excluded group is never
// written, while an idle included group is synced.
func TestActiveGroupNotOverwritten(t *testing.T) {
	dumpLogs(t)
	const mirror, topic = "activegroup", "activegroup"
	createSourceTopic(t, topic, 2, nil)
	produceIDs(t, topic, 400)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		syncedMirrorConfig(t, map[string]string{"mirror.groups.exclude": "excluded-.*"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)
	src := endOffsets(t, env.Source, topic)

	// A live consumer of group busy on the destination, with offsets 1.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	busy := newClient(t, env.Destination, testbed.Admin, kgo.ConsumerGroup("busy"), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	wait.For(t, time.Minute, "the destination consumer of group busy to join", func() bool {
		busy.PollRecords(ctx, 1)
		gs, err := kadm.NewClient(newClient(t, env.Destination, testbed.Admin)).DescribeGroups(ctx, "busy")
		return err == nil && gs["busy"].State == "Stable"
	})
	ownOffsets := map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 1}, 1: {Epoch: -1, Offset: 1}}}
	var commitErr error
	busy.CommitOffsetsSync(ctx, ownOffsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if resp != nil {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if e := kerr.ErrorForCode(rp.ErrorCode); e != nil {
						commitErr = e
					}
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit on the destination: %v", commitErr)
	}

	half := map[int32]int64{0: src[0] / 2, 1: src[1] / 2}
	commitOffsets(t, env.Source, "busy", topic, half)
	commitOffsets(t, env.Source, "excluded-g", topic, half)
	commitOffsets(t, env.Source, "idle", topic, half)
	wait.For(t, 30*time.Second, "group idle on the destination", func() bool {
		return maps.Equal(groupOffsets(t, env.Destination, "idle", topic), half)
	})
	// One more full round after that: move idle and wait again.
	moved := map[int32]int64{0: src[0], 1: src[1]}
	commitOffsets(t, env.Source, "idle", topic, moved)
	wait.For(t, 30*time.Second, "group idle moved on the destination", func() bool {
		return maps.Equal(groupOffsets(t, env.Destination, "idle", topic), moved)
	})
	if got := groupOffsets(t, env.Destination, "busy", topic); !maps.Equal(got, map[int32]int64{0: 1, 1: 1}) {
		t.Errorf("group busy with a live consumer on the destination has offsets %v, want its own {0:1 1:1}", got)
	}
	if got := groupOffsets(t, env.Destination, "excluded-g", topic); len(got) != 0 {
		t.Errorf("excluded group written on the destination: %v", got)
	}
}

// aclEntry is one ACL as DescribeACLs lists it.
type aclEntry struct {
	resourceType kmsg.ACLResourceType
	name         string
	pattern      kmsg.ACLResourcePatternType
	principal    string
	host         string
	op           kmsg.ACLOperation
	perm         kmsg.ACLPermissionType
}

func (a aclEntry) String() string {
	return fmt.Sprintf("%s:%s:%s %s@%s %s %s", a.resourceType, a.pattern, a.name, a.principal, a.host, a.op, a.perm)
}

// literalTopicACL and literalGroupACL build ACLs for host *.
func literalTopicACL(topic, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclEntry {
	return aclEntry{kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral, principal, "*", op, perm}
}

func literalGroupACL(group, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclEntry {
	return aclEntry{kmsg.ACLResourceTypeGroup, group, kmsg.ACLResourcePatternTypeLiteral, principal, "*", op, perm}
}

// aclsOn lists every ACL of c (any resource, pattern, operation and
// permission), read with DescribeACLs as the admin user.
func aclsOn(t *testing.T, c *testbed.Cluster) map[aclEntry]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, newClient(t, c, testbed.Admin))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("describe ACLs on %s: %v", c.Name(), err)
	}
	out := map[aclEntry]bool{}
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out[aclEntry{r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType}] = true
		}
	}
	return out
}

// createACLs creates ACLs on c as the admin user.
func createACLs(t *testing.T, c *testbed.Cluster, acls ...aclEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = a.resourceType, a.name, a.pattern
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = a.principal, a.host, a.op, a.perm
		req.Creations = append(req.Creations, cr)
	}
	resp, err := req.RequestWith(ctx, newClient(t, c, testbed.Admin))
	if err == nil {
		for _, r := range resp.Results {
			if e := kerr.ErrorForCode(r.ErrorCode); e != nil && err == nil {
				err = fmt.Errorf("%w: %s", e, deref(r.ErrorMessage))
			}
		}
	}
	if err != nil {
		t.Fatalf("create ACLs on %s: %v", c.Name(), err)
	}
}

// deleteACLs deletes exactly the given ACLs on c as the admin user.
func deleteACLs(t *testing.T, c *testbed.Cluster, acls ...aclEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, a := range acls {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = a.resourceType, kmsg.StringPtr(a.name), a.pattern
		f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(a.principal), kmsg.StringPtr(a.host), a.op, a.perm
		req.Filters = append(req.Filters, f)
	}
	resp, err := req.RequestWith(ctx, newClient(t, c, testbed.Admin))
	if err == nil {
		for _, r := range resp.Results {
			if e := kerr.ErrorForCode(r.ErrorCode); e != nil && err == nil {
				err = e
			}
			if len(r.MatchingACLs) != 1 && err == nil {
				err = fmt.Errorf("a filter matched %d ACLs, want 1", len(r.MatchingACLs))
			}
		}
	}
	if err != nil {
		t.Fatalf("delete ACLs on %s: %v", c.Name(), err)
	}
}

// missingACLs returns the ACLs of want that have lacks.
func missingACLs(have map[aclEntry]bool, want ...aclEntry) []aclEntry {
	var out []aclEntry
	for _, a := range want {
		if !have[a] {
			out = append(out, a)
		}
	}
	return out
}

// TestAclSync creates ACLs on the source for a mirrored topic and a group
// and expects the metadata sync to copy the literal ones of the mirror's
// scope to the destination, then to delete there the one deleted on the
// source. The sidecars' read-only DENY WRITE and an ACL a destination user
// created (even one the source also had) are never touched; prefixed ACLs
// and ACLs of unmirrored topics are not copied.
func TestAclSync(t *testing.T) {
	dumpLogs(t)
	const mirror, topic, other, group = "aclsync", "aclsync", "aclsync-unmirrored", "aclsync-g"
	createSourceTopic(t, topic, 1, nil)
	createSourceTopic(t, other, 1, nil)
	produceIDs(t, topic, 50)
	mustCLI(t, "--create", "--mirror", mirror, "--mirror-config",
		syncedMirrorConfig(t, map[string]string{"mirror.metadata.refresh.interval.ms": "1000"}))
	mustCLI(t, "--start", "--topics", topic, "--mirror", mirror)
	waitCaughtUp(t, mirror, topic, 2*time.Minute)

	const (
		read     = kmsg.ACLOperationRead
		write    = kmsg.ACLOperationWrite
		describe = kmsg.ACLOperationDescribe
		allow    = kmsg.ACLPermissionTypeAllow
		deny     = kmsg.ACLPermissionTypeDeny
	)
	readOnly := literalTopicACL(topic, "User:*", write, deny) // DESIGN D4, created by the start
	if dst := aclsOn(t, env.Destination); !dst[readOnly] {
		t.Fatalf("the started mirror topic has no %v on the destination", readOnly)
	}
	// A destination user's own ACLs: one only there, one the source gets
	// too (and later loses).
	carolOwn := literalTopicACL(topic, "User:carol", describe, allow)
	carolBoth := literalTopicACL(topic, "User:carol", read, allow)
	createACLs(t, env.Destination, carolOwn, carolBoth)

	aliceTopic := literalTopicACL(topic, "User:alice", read, allow)
	aliceGroup := literalGroupACL(group, "User:alice", read, allow)
	bobDenied := literalTopicACL(topic, "User:bob", read, deny)
	prefixed := aclEntry{kmsg.ACLResourceTypeTopic, "aclsync", kmsg.ACLResourcePatternTypePrefixed, "User:alice", "*", describe, allow}
	unmirrored := literalTopicACL(other, "User:alice", read, allow)
	createACLs(t, env.Source, aliceTopic, aliceGroup, bobDenied, carolBoth, prefixed, unmirrored)

	wait.For(t, 30*time.Second, "the source's ACLs on the destination", func() bool {
		return len(missingACLs(aclsOn(t, env.Destination), aliceTopic, aliceGroup, bobDenied)) == 0
	})
	dst := aclsOn(t, env.Destination)
	if dst[prefixed] || dst[unmirrored] {
		t.Errorf("copied ACLs out of the sync's scope (literal names of mirror topics and groups): prefixed %v, unmirrored topic %v", dst[prefixed], dst[unmirrored])
	}

	// Removed on the source: alice's topic ACL and carol's READ. Only the
	// first was created by the sync.
	deleteACLs(t, env.Source, aliceTopic, carolBoth)
	wait.For(t, 30*time.Second, "the ACL removed on the source to go from the destination", func() bool {
		return !aclsOn(t, env.Destination)[aliceTopic]
	})
	// Two more rounds of the ACL step give a wrong deletion its chance.
	waitSyncRounds(t, mirror, "acls", 2)
	dst = aclsOn(t, env.Destination)
	if m := missingACLs(dst, readOnly, carolOwn, carolBoth, aliceGroup, bobDenied); len(m) > 0 {
		t.Fatalf("ACLs gone from the destination: %v\n(destination ACLs: %v)", m, dst)
	}
	if src := aclsOn(t, env.Source); src[aliceTopic] || src[carolBoth] || !src[aliceGroup] {
		t.Fatalf("the source's ACLs are not as the test left them: %v", src)
	}
}
