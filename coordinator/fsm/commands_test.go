package fsm_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
	"github.com/sidemirror/sidemirror/internal/acl"
)

func strPtr(s string) *string { return &s }

// allCommands has one filled-in command of every type.
func allCommands() []fsm.Command {
	return []fsm.Command{
		fsm.CreateMirror{Name: "m", Config: map[string]string{fsm.BootstrapServersKey: "h:9092", "sasl.mechanism": "PLAIN"},
			SourceClusterID: "abc", Include: []string{"a.*"}, Exclude: []string{"^x$"}, NowMs: 17},
		fsm.DeleteMirror{Name: "m"},
		fsm.AlterMirrorConfig{Name: "m", Set: map[string]string{"k": "v"}, Delete: []string{"d"}, NowMs: 18},
		fsm.SetSourceClusterID{Name: "m", ClusterID: "abc"},
		fsm.StartTopics{Mirror: "m", Topics: []fsm.StartTopic{{Name: "t", Partitions: 3, SourceTopicID: [16]byte{1, 2, 255}, Unprotected: true,
			Diverged: []fsm.Divergence{{Partition: 1, Offset: 1180, Extra: 20, Exact: true}}}},
			AddInclude: []string{"t.*"}, AddExclude: []string{"u"}, NowMs: 19},
		fsm.SetTopicStatus{Mirror: "m", Topics: []string{"t"}, Status: fsm.TopicStopped, NowMs: 20, AddExclude: []string{"^t$"}, RemoveInclude: []string{"t.*"}},
		fsm.RecordACLs{Topic: "t", ACLs: []fsm.ACL{{ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:*", Host: "*", Operation: 4, Permission: 2}}},
		fsm.SetUnprotected{Topic: "t", Unprotected: true},
		fsm.RegisterSidecar{ID: 3, RaftAddr: "h:9192", AdminAddr: "h:9191", Version: "v1"},
		fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{{Topic: "t", Partition: 2, Replicas: []int32{3, 1, 2}}}},
		fsm.ClearReplicaOrder{Partitions: []fsm.TopicPartition{{Topic: "t", Partition: 2}}},
		fsm.RemoveSidecar{ID: 3},
		fsm.AlterMirrorPatterns{Name: "m", AddInclude: []string{"b.*"}, RemoveInclude: []string{"a.*"},
			AddExclude: []string{"^y$"}, RemoveExclude: []string{"^x$"}, NowMs: 21},
		fsm.RestartTopics{Mirror: "m", Topics: []string{"t"}, NowMs: 22},
		fsm.SetTopicPartitions{Topic: "t", Partitions: 5},
		fsm.SetSyncFault{Mirror: "m", Topic: "t", Fault: "recreated"},
		fsm.RecordSyncedACLs{Mirror: "m", ACLs: []fsm.ACL{{ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}}},
		fsm.ReadBarrier{},
		fsm.SetDiverged{Mirror: "m", Topic: "t", Diverged: []fsm.Divergence{{Partition: 2, Offset: 7, Extra: 3}}, NowMs: 23},
		fsm.CreateAdminACLs{ACLs: []acl.Binding{{ResourceType: acl.ResourceClusterMirror, ResourceName: "m", PatternType: acl.PatternLiteral,
			Principal: "User:mirror-admin", Host: "*", Operation: acl.OpAlter, Permission: acl.PermissionAllow}}},
		fsm.DeleteAdminACLs{Filters: []acl.Filter{{ResourceType: acl.ResourceClusterMirror, ResourceName: strPtr("m"), PatternType: acl.PatternLiteral,
			Principal: strPtr("User:mirror-admin"), Host: strPtr("*"), Operation: acl.OpAlter, Permission: acl.PermissionAllow}}},
		fsm.AlterBrokerConfig{Broker: 4, Set: map[string]string{fsm.ThrottledRateKey: "100000000"}, Delete: []string{"x"}},
		fsm.AlterTopicConfig{Topic: "t", Set: map[string]string{fsm.ThrottledReplicasKey: "0:4"}, Delete: []string{"y"}},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	seen := map[fsm.CommandType]bool{}
	for _, c := range allCommands() {
		t.Run(c.Type().String(), func(t *testing.T) {
			b := fsmtest.MustEncode(t, c)
			if b[0] != byte(c.Type()) || b[1] != fsm.CurrentVersion(c.Type()) {
				t.Fatalf("header = %d %d, want type %d version %d", b[0], b[1], c.Type(), fsm.CurrentVersion(c.Type()))
			}
			got, err := fsm.DecodeCommand(b)
			if err != nil {
				t.Fatalf("DecodeCommand: %v", err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, c)
			}
		})
		seen[c.Type()] = true
	}
	for _, ct := range fsm.CommandTypes() {
		if !seen[ct] {
			t.Errorf("command type %s has no round-trip case", ct)
		}
	}
}

// TestStartTopicsV1 decodes a StartTopics body as version 1 wrote it
// (before StartTopic.Diverged): raft logs on disk hold such commands.
func TestStartTopicsV1(t *testing.T) {
	v1 := append([]byte{byte(fsm.CmdStartTopics), 1}, `{"mirror":"m","topics":[{"name":"t","partitions":3,`+
		`"sourceTopicId":[1,2,255,0,0,0,0,0,0,0,0,0,0,0,0,0],"unprotected":true}],"addInclude":["t.*"],"addExclude":null,"nowMs":19}`...)
	got, err := fsm.DecodeCommand(v1)
	if err != nil {
		t.Fatalf("DecodeCommand(v1): %v", err)
	}
	want := fsm.StartTopics{Mirror: "m", Topics: []fsm.StartTopic{{Name: "t", Partitions: 3, SourceTopicID: [16]byte{1, 2, 255}, Unprotected: true}},
		AddInclude: []string{"t.*"}, NowMs: 19}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("v1 decodes to\n %#v\nwant %#v", got, want)
	}
	// Without divergences v2 writes what v1 wrote, bar the version byte.
	b := fsmtest.MustEncode(t, want)
	if b[1] != 2 || string(b[2:]) != string(v1[2:]) {
		t.Fatalf("v2 body %s, want the v1 body %s", b[2:], v1[2:])
	}
}

func TestDecodeCommandErrors(t *testing.T) {
	valid := fsmtest.MustEncode(t, fsm.DeleteMirror{Name: "m"})
	for _, tc := range []struct {
		name string
		in   []byte
		want error
		code int16 // the Result code applyCommand gives
	}{
		{"empty", nil, fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
		{"type only", []byte{byte(fsm.CmdDeleteMirror)}, fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
		{"unknown type", []byte{0xEE, 1, '{', '}'}, fsm.ErrUnknownCommand, kerr.UnsupportedVersion.Code},
		{"type zero", []byte{0, 1, '{', '}'}, fsm.ErrUnknownCommand, kerr.UnsupportedVersion.Code},
		{"unknown version", append([]byte{byte(fsm.CmdDeleteMirror), 2}, valid[2:]...), fsm.ErrUnknownCommand, kerr.UnsupportedVersion.Code},
		{"no body", []byte{byte(fsm.CmdDeleteMirror), 1}, fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
		{"not JSON", []byte{byte(fsm.CmdDeleteMirror), 1, 'x'}, fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
		{"unknown field", []byte("\x02\x01{\"name\":\"m\",\"force\":true}"), fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
		{"trailing data", append(append([]byte(nil), valid...), '{', '}'), fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
		{"wrong field type", []byte("\x02\x01{\"name\":5}"), fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
		{"array body", []byte("\x02\x01[]"), fsm.ErrMalformedCommand, kerr.InvalidRequest.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := fsm.DecodeCommand(tc.in)
			if !errors.Is(err, tc.want) || c != nil {
				t.Fatalf("DecodeCommand = %v, %v; want nil, %v", c, err, tc.want)
			}
			s := fsmtest.State(t)
			before := s.Clone()
			res := fsm.ApplyTo(s, tc.in)
			if res.ErrorCode != tc.code || res.ErrorMessage == "" {
				t.Fatalf("applyCommand = %+v, want code %d with a message", res, tc.code)
			}
			if !reflect.DeepEqual(s, before) {
				t.Fatal("state changed")
			}
		})
	}
}

func TestEncodeCommandNil(t *testing.T) {
	if _, err := fsm.EncodeCommand(nil); !errors.Is(err, fsm.ErrMalformedCommand) {
		t.Fatalf("EncodeCommand(nil) = %v", err)
	}
}
