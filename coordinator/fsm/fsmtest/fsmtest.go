// Package fsmtest holds the fixtures that tests of the controller build
// states and commands from: a state with two mirrors and topics in every
// status, and helpers that apply commands and fail the test on errors.
package fsmtest

import (
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// MustEncode encodes c or fails the test.
func MustEncode(t testing.TB, c fsm.Command) []byte {
	t.Helper()
	b, err := fsm.EncodeCommand(c)
	if err != nil {
		t.Fatalf("EncodeCommand(%T): %v", c, err)
	}
	return b
}

// MustApply applies cmds to s and fails the test on any error, top-level or
// per topic.
func MustApply(t testing.TB, s *fsm.State, cmds ...fsm.Command) {
	t.Helper()
	for _, c := range cmds {
		res := fsm.ApplyTo(s, MustEncode(t, c))
		if res.ErrorCode != 0 {
			t.Fatalf("setup %T: error %d: %s", c, res.ErrorCode, res.ErrorMessage)
		}
		for _, tr := range res.Topics {
			if tr.ErrorCode != 0 {
				t.Fatalf("setup %T: topic %s: error %d: %s", c, tr.Name, tr.ErrorCode, tr.ErrorMessage)
			}
		}
	}
}

// BootstrapConfig is a minimal valid mirror config.
func BootstrapConfig() map[string]string {
	return map[string]string{fsm.BootstrapServersKey: "src1:9092,src2:9092", "security.protocol": "PLAINTEXT"}
}

// Commands build the state most tests start from:
//
//	mirror m1: topics a (active), p (paused), s (stopped); include "a.*"
//	mirror m2: topic b (active)
//	sidecar 1
func Commands() []fsm.Command {
	return []fsm.Command{
		fsm.CreateMirror{Name: "m1", Config: BootstrapConfig(), Include: []string{"a.*"}, NowMs: 1000},
		fsm.CreateMirror{Name: "m2", Config: BootstrapConfig(), NowMs: 1001},
		fsm.StartTopics{Mirror: "m1", Topics: []fsm.StartTopic{
			{Name: "a", Partitions: 3, SourceTopicID: [16]byte{1}},
			{Name: "p", Partitions: 1, SourceTopicID: [16]byte{2}},
			{Name: "s", Partitions: 2, SourceTopicID: [16]byte{3}},
		}, NowMs: 2000},
		fsm.StartTopics{Mirror: "m2", Topics: []fsm.StartTopic{{Name: "b", Partitions: 6}}, NowMs: 2001},
		fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"p"}, Status: fsm.TopicPaused, NowMs: 3000},
		fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"s"}, Status: fsm.TopicStopped, NowMs: 3001},
		fsm.RecordACLs{Topic: "s", ACLs: []fsm.ACL{{ResourceType: 2, ResourceName: "s", PatternType: 3, Principal: "User:*", Host: "*", Operation: 4, Permission: 2}}},
		fsm.RegisterSidecar{ID: 1, RaftAddr: "h1:9192", AdminAddr: "h1:9191", Version: "test"},
	}
}

// State returns the state Commands build.
func State(t testing.TB) *fsm.State {
	t.Helper()
	s := fsm.NewState()
	MustApply(t, s, Commands()...)
	return s
}

// RecordOrder is a RecordReplicaOrder of one partition.
func RecordOrder(topic string, p int32, replicas ...int32) fsm.RecordReplicaOrder {
	return fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{{Topic: topic, Partition: p, Replicas: replicas}}}
}
