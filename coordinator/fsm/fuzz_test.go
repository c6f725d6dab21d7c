package fsm_test

import (
	"reflect"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

// FuzzApply feeds arbitrary bytes to the command decoder and to Apply on a
// state with mirrors and topics in every status.
//
// Invariants: nothing panics; the state stays valid (State.Validate); a
// top-level error leaves the state unchanged; a command that decodes
// re-encodes to a command that decodes to the same value.
func FuzzApply(f *testing.F) {
	for _, c := range append(fsmtest.Commands(), allCommands()...) {
		f.Add(fsmtest.MustEncode(f, c))
	}
	for _, c := range []fsm.Command{
		fsm.DeleteMirror{Name: "m1"},
		fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"a", "p", "s", "b", "x"}, Status: fsm.TopicStopped},
		fsm.StartTopics{Mirror: "m2", Topics: []fsm.StartTopic{{Name: "a", Partitions: 1}, {Name: "s", Partitions: 1}}},
		fsm.AlterMirrorConfig{Name: "m1", Delete: []string{fsm.BootstrapServersKey}},
		fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{{Topic: "a", Partition: 0, Replicas: []int32{2, 1, 3}}, {Topic: "s", Partition: 1, Replicas: []int32{1}}}},
		fsm.ClearReplicaOrder{Partitions: []fsm.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "gone", Partition: 3}}},
	} {
		f.Add(fsmtest.MustEncode(f, c))
	}
	f.Add([]byte{})
	f.Add([]byte{byte(fsm.CmdStartTopics), 1, '{'})
	f.Add([]byte("\x05\x01{\"mirror\":\"m1\",\"topics\":[{\"name\":\"\",\"partitions\":-1}]}"))

	base := fsmtest.State(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := fsm.DecodeCommand(data); err == nil {
			again, err := fsm.DecodeCommand(fsmtest.MustEncode(t, c))
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("re-encoding %#v gave %#v, %v", c, again, err)
			}
		}
		s := base.Clone()
		res := fsm.ApplyTo(s, data)
		if err := s.Validate(); err != nil {
			t.Fatalf("state invalid after %q (result %+v): %v", data, res, err)
		}
		if res.ErrorCode != 0 && !reflect.DeepEqual(s, base) {
			t.Fatalf("command %q failed (%s) but changed the state", data, res.ErrorMessage)
		}
		if res.ErrorCode != 0 && res.ErrorMessage == "" {
			t.Fatalf("command %q failed with code %d and no message", data, res.ErrorCode)
		}
	})
}
