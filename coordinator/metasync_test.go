package coordinator

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/internal/testwait"
)

func TestConfigChanges(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		source   map[string]string
		maxBytes int64
		current  map[string]string
		exclude  map[string]bool
		want     []kadm.AlterConfig
	}{
		{
			name:   "new override copied, forced values set",
			source: map[string]string{"retention.ms": "1000"},
			current: map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime",
				"message.timestamp.before.max.ms": maxTimestampDiff, "message.timestamp.after.max.ms": maxTimestampDiff},
			want: []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: str("1000")}},
		},
		{
			name:   "forced values win over the source",
			source: map[string]string{"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"},
			current: map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime",
				"message.timestamp.before.max.ms": maxTimestampDiff, "message.timestamp.after.max.ms": maxTimestampDiff},
		},
		{
			name:   "a forced value changed on the destination is put back",
			source: map[string]string{},
			current: map[string]string{"compression.type": "lz4", "message.timestamp.type": "CreateTime",
				"message.timestamp.before.max.ms": maxTimestampDiff, "message.timestamp.after.max.ms": maxTimestampDiff},
			want: []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: str("producer")}},
		},
		{
			name:   "never-copied and excluded configs are neither copied nor deleted",
			source: map[string]string{"min.insync.replicas": "3", "leader.replication.throttled.replicas": "*", "segment.ms": "5", "cleanup.policy": "compact"},
			current: map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime",
				"message.timestamp.before.max.ms": maxTimestampDiff, "message.timestamp.after.max.ms": maxTimestampDiff,
				"min.insync.replicas": "2", "segment.ms": "99"},
			exclude: map[string]bool{"segment.ms": true},
			want:    []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: str("compact")}},
		},
		{
			name:   "removed on the source: deleted on the destination",
			source: map[string]string{},
			current: map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime",
				"message.timestamp.before.max.ms": maxTimestampDiff, "message.timestamp.after.max.ms": maxTimestampDiff,
				"retention.ms": "1000"},
			want: []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}},
		},
		{
			name:     "max.message.bytes follows the source's effective value",
			source:   map[string]string{},
			maxBytes: 2000000,
			current: map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime",
				"message.timestamp.before.max.ms": maxTimestampDiff, "message.timestamp.after.max.ms": maxTimestampDiff,
				"max.message.bytes": "1048588"},
			want: []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: str("2000000")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := configChanges(tc.source, tc.maxBytes, tc.current, tc.exclude)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("configChanges:\n got %s\nwant %s", fmtChanges(got), fmtChanges(tc.want))
			}
		})
	}
}

func fmtChanges(cs []kadm.AlterConfig) string {
	var parts []string
	for _, c := range cs {
		v := "<nil>"
		if c.Value != nil {
			v = *c.Value
		}
		parts = append(parts, c.Name+"="+v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestGroupFilter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  map[string]string
		group   string
		matched bool
	}{
		{"default includes all", nil, "anything", true},
		{"include pattern", map[string]string{GroupsIncludeKey: "app-.*,billing"}, "app-1", true},
		{"include literal", map[string]string{GroupsIncludeKey: "app-.*,billing"}, "billing", true},
		{"not included", map[string]string{GroupsIncludeKey: "app-.*,billing"}, "billing2", false},
		{"excluded", map[string]string{GroupsExcludeKey: "tmp-.*"}, "tmp-1", false},
		{"exclude wins", map[string]string{GroupsIncludeKey: "app-.*", GroupsExcludeKey: "app-test"}, "app-test", false},
		{"anchored", map[string]string{GroupsExcludeKey: "tmp"}, "tmp-1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newGroupFilter(&fsm.Mirror{Config: tc.config})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.match(tc.group); got != tc.matched {
				t.Fatalf("match(%q) = %v, want %v", tc.group, got, tc.matched)
			}
		})
	}
	if err := checkMirrorKeys(map[string]string{GroupsIncludeKey: "("}); err == nil {
		t.Fatal("an invalid group pattern was accepted")
	}
}

func TestGroupWritable(t *testing.T) {
	for _, tc := range []struct {
		state  string
		listed bool
		want   bool
	}{
		{"", false, true}, {"Empty", true, true}, {"Dead", true, true},
		{"Stable", true, false}, {"PreparingRebalance", true, false}, {"CompletingRebalance", true, false},
		{"Reconciling", true, false}, {"Assigning", true, false},
	} {
		if got := groupWritable(tc.state, tc.listed); got != tc.want {
			t.Errorf("groupWritable(%q, %v) = %v, want %v", tc.state, tc.listed, got, tc.want)
		}
	}
}

func TestGroupOffsetsToCommit(t *testing.T) {
	source := kadm.OffsetResponses{}
	add := func(rs kadm.OffsetResponses, topic string, p int32, at int64, epoch int32) {
		if rs[topic] == nil {
			rs[topic] = map[int32]kadm.OffsetResponse{}
		}
		rs[topic][p] = kadm.OffsetResponse{Offset: kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: epoch}}
	}
	add(source, "t", 0, 50, 7)  // below the HW: as is
	add(source, "t", 1, 500, 7) // above the HW: clamped
	add(source, "t", 2, 30, 7)  // the destination has it already
	add(source, "t", 3, 10, 7)  // a partition the mirror does not know yet
	add(source, "other", 0, 5, 7)
	topics := map[string]*fsm.MirrorTopic{"t": {Name: "t", Partitions: 3}}
	hw := map[string]map[int32]int64{"t": {0: 100, 1: 100, 2: 100}}
	dest := kadm.OffsetResponses{}
	add(dest, "t", 2, 30, -1)
	got := groupOffsetsToCommit(source, topics, hw, dest, nil)
	want := kadm.Offsets{"t": {
		0: {Topic: "t", Partition: 0, At: 50, LeaderEpoch: -1},
		1: {Topic: "t", Partition: 1, At: 100, LeaderEpoch: -1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groupOffsetsToCommit:\n got %+v\nwant %+v", got, want)
	}
}

// TestSyncGroupOffsets syncs against kfake clusters: an idle group's
// offsets arrive clamped, a group with a member on the destination and an
// excluded group are never written.
func TestSyncGroupOffsets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, dst := kfakeClient(t, 2), kfakeClient(t, 2)
	// The destination has 10 records in partition 0, 3 in partition 1.
	for p, n := range map[int32]int{0: 10, 1: 3} {
		for range n {
			if err := dst.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	srcAdm, dstAdm := kadm.NewClient(src), kadm.NewClient(dst)
	commit := func(adm *kadm.Client, group string, p0, p1 int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "t", Partition: 0, At: p0, LeaderEpoch: -1})
		os.Add(kadm.Offset{Topic: "t", Partition: 1, At: p1, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	commit(srcAdm, "idle", 4, 8)
	commit(srcAdm, "busy", 5, 2)
	commit(srcAdm, "tmp-excluded", 6, 1)
	// "busy" has a live consumer on the destination.
	member, err := kgo.NewClient(kgo.SeedBrokers(dst.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	testwait.For(t, 15*time.Second, "the destination group busy to be stable", func() bool {
		member.PollRecords(ctx, 1)
		gs, err := dstAdm.ListGroups(ctx)
		return err == nil && gs["busy"].State == "Stable"
	})
	busyBefore, err := dstAdm.FetchOffsets(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}

	m := &fsm.Mirror{Name: "m", Config: map[string]string{GroupsExcludeKey: "tmp-.*"}}
	topics := map[string]*fsm.MirrorTopic{"t": {Name: "t", Mirror: "m", Partitions: 2, Status: fsm.TopicActive}}
	n, err := syncGroupOffsets(ctx, zap.NewNop(), m, srcAdm, dstAdm, topics, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("committed %d offsets, want 2 (group idle)", n)
	}
	got, err := dstAdm.FetchOffsets(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 4, 1: 3} { // 8 clamped to the HW 3
		o, ok := got.Lookup("t", p)
		if !ok || o.At != want || o.LeaderEpoch != -1 {
			t.Errorf("idle t-%d on the destination = %+v (found %v), want offset %d epoch -1", p, o.Offset, ok, want)
		}
	}
	excluded, err := dstAdm.FetchOffsets(ctx, "tmp-excluded")
	if err != nil && !strings.Contains(err.Error(), kerr.GroupIDNotFound.Message) {
		t.Fatal(err)
	}
	if _, ok := excluded.Lookup("t", 0); ok {
		t.Errorf("the excluded group was written: %+v", excluded)
	}
	busyAfter, err := dstAdm.FetchOffsets(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := busyAfter.Lookup("t", 0); o.At == 5 {
		t.Errorf("the group with an active member was overwritten: before %+v, after %+v", busyBefore, busyAfter)
	}
	// A second round has nothing to do.
	if n, err := syncGroupOffsets(ctx, zap.NewNop(), m, srcAdm, dstAdm, topics, nil, nil); err != nil || n != 0 {
		t.Errorf("second round: %d commits, %v; want 0, nil", n, err)
	}
}

func TestPlanACLs(t *testing.T) {
	acl := func(rt int8, name, principal string, op, perm int8) fsm.ACL {
		return fsm.ACL{ResourceType: rt, ResourceName: name, PatternType: aclPatternLiteral, Principal: principal, Host: "*", Operation: op, Permission: perm}
	}
	const read, allow, deny = 3, 3, 2
	readT := acl(aclResourceTopic, "t", "User:alice", read, allow)
	readG := acl(aclResourceGroup, "g", "User:alice", read, allow)
	denyBob := acl(aclResourceTopic, "t", "User:bob", read, deny)
	userOwn := acl(aclResourceTopic, "t", "User:carol", read, allow)
	sidecars := acl(aclResourceTopic, "t", everyone, aclOperationWrite, aclPermissionDeny)
	stoppedT := acl(aclResourceTopic, "stopped", "User:alice", read, allow)
	inScope := func(a fsm.ACL) bool { return a.ResourceName == "t" || a.ResourceName == "g" }
	for _, tc := range []struct {
		name                 string
		source, dest, synced []fsm.ACL
		want                 aclPlan
	}{
		{"new source ACLs are created and owned", []fsm.ACL{readT, readG, denyBob}, nil, nil,
			aclPlan{create: []fsm.ACL{readT, readG, denyBob}, owned: []fsm.ACL{readT, readG, denyBob}}},
		{"already synced: nothing to do", []fsm.ACL{readT}, []fsm.ACL{readT}, []fsm.ACL{readT},
			aclPlan{owned: []fsm.ACL{readT}}},
		{"removed on the source: deleted", nil, []fsm.ACL{readT}, []fsm.ACL{readT},
			aclPlan{remove: []fsm.ACL{readT}}},
		{"a user's ACL on the destination is never owned nor deleted", []fsm.ACL{userOwn}, []fsm.ACL{userOwn}, nil,
			aclPlan{}},
		{"the sidecars' ACLs are never copied nor deleted", []fsm.ACL{sidecars}, []fsm.ACL{sidecars}, []fsm.ACL{sidecars},
			aclPlan{owned: []fsm.ACL{sidecars}}},
		{"out of scope (stopped topic): kept", nil, []fsm.ACL{stoppedT}, []fsm.ACL{stoppedT},
			aclPlan{owned: []fsm.ACL{stoppedT}}},
		{"source ACLs out of scope are not copied", []fsm.ACL{stoppedT}, nil, nil, aclPlan{}},
		{"owned but missing on the destination (a create cut short): created again", []fsm.ACL{readT, readG}, []fsm.ACL{readG}, []fsm.ACL{readT, readG},
			aclPlan{create: []fsm.ACL{readT}, owned: []fsm.ACL{readT, readG}}},
		{"owned, missing and removed on the source: nothing left to create", []fsm.ACL{readG}, []fsm.ACL{readG}, []fsm.ACL{readT, readG},
			aclPlan{remove: []fsm.ACL{readT}, owned: []fsm.ACL{readG}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planACLs(tc.source, tc.dest, tc.synced, []fsm.ACL{sidecars}, inScope)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("planACLs:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMetaSyncCommands(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cmd   fsm.Command
		code  int16
		check func(t *testing.T, s *fsm.State)
	}{
		{"partitions grow", fsm.SetTopicPartitions{Topic: "a", Partitions: 5}, 0,
			func(t *testing.T, s *fsm.State) {
				if s.Topics["a"].Partitions != 5 {
					t.Errorf("partitions = %d, want 5", s.Topics["a"].Partitions)
				}
			}},
		{"partitions never shrink", fsm.SetTopicPartitions{Topic: "a", Partitions: 2}, kerr.InvalidPartitions.Code, nil},
		{"same count is a no-op", fsm.SetTopicPartitions{Topic: "a", Partitions: 3}, 0, nil},
		{"paused topic grows too", fsm.SetTopicPartitions{Topic: "p", Partitions: 2}, 0, nil},
		{"stopped topic refused", fsm.SetTopicPartitions{Topic: "s", Partitions: 4}, kerr.InvalidRequest.Code, nil},
		{"unknown topic", fsm.SetTopicPartitions{Topic: "nope", Partitions: 4}, kerr.UnknownTopicOrPartition.Code, nil},
		{"mirror fault", fsm.SetSyncFault{Mirror: "m1", Fault: "other cluster"}, 0,
			func(t *testing.T, s *fsm.State) {
				if s.Mirrors["m1"].SyncFault != "other cluster" {
					t.Errorf("mirror fault = %q", s.Mirrors["m1"].SyncFault)
				}
			}},
		{"topic fault", fsm.SetSyncFault{Mirror: "m1", Topic: "a", Fault: "recreated"}, 0,
			func(t *testing.T, s *fsm.State) {
				if s.Topics["a"].SyncFault != "recreated" || s.Mirrors["m1"].SyncFault != "" {
					t.Errorf("topic fault = %q, mirror fault = %q", s.Topics["a"].SyncFault, s.Mirrors["m1"].SyncFault)
				}
			}},
		{"topic of another mirror", fsm.SetSyncFault{Mirror: "m2", Topic: "a", Fault: "x"}, kerr.InvalidRequest.Code, nil},
		{"fault of an unknown mirror", fsm.SetSyncFault{Mirror: "nope", Fault: "x"}, kerr.ResourceNotFound.Code, nil},
		{"synced ACLs", fsm.RecordSyncedACLs{Mirror: "m1", ACLs: []fsm.ACL{{ResourceType: 2, ResourceName: "a", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}}}, 0,
			func(t *testing.T, s *fsm.State) {
				if len(s.Mirrors["m1"].SyncedACLs) != 1 {
					t.Errorf("synced ACLs = %+v", s.Mirrors["m1"].SyncedACLs)
				}
			}},
		{"synced ACL without principal", fsm.RecordSyncedACLs{Mirror: "m1", ACLs: []fsm.ACL{{ResourceName: "a"}}}, kerr.InvalidRequest.Code, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fsmtest.State(t)
			before := s.Clone()
			res := fsm.ApplyTo(s, fsmtest.MustEncode(t, tc.cmd))
			if res.ErrorCode != tc.code {
				t.Fatalf("code = %d (%s), want %d", res.ErrorCode, res.ErrorMessage, tc.code)
			}
			if tc.code != 0 && !reflect.DeepEqual(s, before) {
				t.Fatal("a refused command changed the state")
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
			// The fields survive Clone.
			if c := s.Clone(); !reflect.DeepEqual(c, s) {
				t.Fatal("Clone lost metadata sync fields")
			}
		})
	}
	// A restarted topic starts without the fault.
	s := fsmtest.State(t)
	fsmtest.MustApply(t, s, fsm.SetSyncFault{Mirror: "m1", Topic: "a", Fault: "recreated"},
		fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"a"}, Status: fsm.TopicStopped},
		fsm.StartTopics{Mirror: "m1", Topics: []fsm.StartTopic{{Name: "a", Partitions: 3, SourceTopicID: [16]byte{9}}}})
	if s.Topics["a"].SyncFault != "" {
		t.Fatalf("restarted topic keeps its fault %q", s.Topics["a"].SyncFault)
	}
}

// TestSyncACLsKfake runs the ACL sync's Kafka half against kfake clusters:
// a source ALLOW READ for alice on a mirrored topic reaches the destination,
// and once removed on the source it is removed on the destination, while a
// destination user's own ACL and the sidecars' DENY stay.
func TestSyncACLsKfake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, dst := kfakeClient(t, 1), kfakeClient(t, 1)
	srcDest, dest := NewDestination(src, "false"), NewDestination(dst, "false")
	aliceRead := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "t", PatternType: aclPatternLiteral, Principal: "User:alice", Host: "*", Operation: 3, Permission: aclPermAllow}
	aliceGroup := fsm.ACL{ResourceType: aclResourceGroup, ResourceName: "g1", PatternType: aclPatternLiteral, Principal: "User:alice", Host: "*", Operation: 3, Permission: aclPermAllow}
	other := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "unmirrored", PatternType: aclPatternLiteral, Principal: "User:alice", Host: "*", Operation: 3, Permission: aclPermAllow}
	carol := fsm.ACL{ResourceType: aclResourceTopic, ResourceName: "t", PatternType: aclPatternLiteral, Principal: "User:carol", Host: "*", Operation: 3, Permission: aclPermAllow}
	if err := srcDest.createACLs(ctx, []fsm.ACL{aliceRead, aliceGroup, other}); err != nil {
		t.Fatal(err)
	}
	owned, err := dest.Protect(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := dest.createACLs(ctx, []fsm.ACL{carol}); err != nil {
		t.Fatal(err)
	}
	inScope := func(a fsm.ACL) bool {
		return a.ResourceType == aclResourceTopic && a.ResourceName == "t" || a.ResourceType == aclResourceGroup
	}
	var synced []fsm.ACL
	round := func() {
		t.Helper()
		var source, current []fsm.ACL
		for _, rt := range []int8{aclResourceTopic, aclResourceGroup} {
			s, err := literalACLs(ctx, src, rt)
			if err != nil {
				t.Fatal(err)
			}
			d, err := literalACLs(ctx, dst, rt)
			if err != nil {
				t.Fatal(err)
			}
			source, current = append(source, s...), append(current, d...)
		}
		p := planACLs(source, current, synced, owned, inScope)
		if len(p.create) > 0 {
			if err := dest.createACLs(ctx, p.create); err != nil {
				t.Fatal(err)
			}
		}
		if err := dest.Unprotect(ctx, p.remove); err != nil {
			t.Fatal(err)
		}
		synced = p.owned
	}
	destACLs := func() []fsm.ACL {
		var out []fsm.ACL
		for _, rt := range []int8{aclResourceTopic, aclResourceGroup} {
			d, err := literalACLs(ctx, dst, rt)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d...)
		}
		return out
	}
	round()
	got := destACLs()
	for _, want := range append([]fsm.ACL{aliceRead, aliceGroup, carol}, owned...) {
		if !slices.Contains(got, want) {
			t.Errorf("destination lacks %+v after the sync; has %+v", want, got)
		}
	}
	if slices.Contains(got, other) {
		t.Errorf("an ACL of an unmirrored topic was copied: %+v", got)
	}
	if err := srcDest.Unprotect(ctx, []fsm.ACL{aliceRead}); err != nil {
		t.Fatal(err)
	}
	round()
	got = destACLs()
	if slices.Contains(got, aliceRead) {
		t.Errorf("ACL removed on the source is still on the destination: %+v", got)
	}
	for _, want := range append([]fsm.ACL{aliceGroup, carol}, owned...) {
		if !slices.Contains(got, want) {
			t.Errorf("destination lost %+v; has %+v", want, got)
		}
	}
}

// kfakeClient starts a one-broker kfake cluster with topic t of partitions
// partitions and returns a client of it that writes to the partition each
// record names; both close when t's test ends.
func kfakeClient(t *testing.T, partitions int32) *kgo.Client {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
