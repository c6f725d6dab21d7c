package fsm_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

func clearOrder(topic string, p int32) fsm.ClearReplicaOrder {
	return fsm.ClearReplicaOrder{Partitions: []fsm.TopicPartition{{Topic: topic, Partition: p}}}
}

// wantMoved checks the whole MovedPartitions map.
func wantMoved(want map[string]map[int32][]int32) func(t *testing.T, _, s *fsm.State) {
	return func(t *testing.T, _, s *fsm.State) {
		t.Helper()
		if !reflect.DeepEqual(s.MovedPartitions, want) {
			t.Fatalf("moved partitions = %v, want %v", s.MovedPartitions, want)
		}
	}
}

func TestApplyRecordReplicaOrder(t *testing.T) {
	two := fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{
		{Topic: "a", Partition: 0, Replicas: []int32{2, 1, 3}},
		{Topic: "b", Partition: 5, Replicas: []int32{1, 2}},
	}}
	runApplyCases(t, []applyCase{
		{name: "records", cmd: two, check: wantMoved(map[string]map[int32][]int32{"a": {0: {2, 1, 3}}, "b": {5: {1, 2}}})},
		{name: "adds to a topic", setup: []fsm.Command{fsmtest.RecordOrder("a", 0, 2, 1, 3)}, cmd: fsmtest.RecordOrder("a", 1, 3, 2, 1),
			check: wantMoved(map[string]map[int32][]int32{"a": {0: {2, 1, 3}, 1: {3, 2, 1}}})},
		{name: "same order again is a no-op", setup: []fsm.Command{fsmtest.RecordOrder("a", 0, 2, 1, 3)}, cmd: fsmtest.RecordOrder("a", 0, 2, 1, 3),
			check: wantMoved(map[string]map[int32][]int32{"a": {0: {2, 1, 3}}})},
		{name: "the first order recorded stays", setup: []fsm.Command{fsmtest.RecordOrder("a", 0, 2, 1, 3)}, cmd: fsmtest.RecordOrder("a", 0, 1, 2, 3),
			code: invalidRequest, msg: "already recorded as [2 1 3], not [1 2 3]"},
		{name: "paused and stopped topics", cmd: fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{
			{Topic: "p", Partition: 0, Replicas: []int32{1}}, {Topic: "s", Partition: 1, Replicas: []int32{1, 2}}}}},
		{name: "unknown topic", cmd: fsmtest.RecordOrder("nope", 0, 1, 2), code: unknownTopicCode, msg: "nope is not a mirror topic"},
		{name: "one bad entry fails all", cmd: fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{
			{Topic: "a", Partition: 0, Replicas: []int32{2, 1}}, {Topic: "a", Partition: 1, Replicas: []int32{2, 2}}}},
			code: invalidRequest, msg: "holds broker 2 twice"},
		{name: "no partition", cmd: fsm.RecordReplicaOrder{}, code: invalidRequest, msg: "names no partition"},
		{name: "listed twice", cmd: fsm.RecordReplicaOrder{Partitions: []fsm.ReplicaOrder{
			{Topic: "a", Partition: 0, Replicas: []int32{2, 1}}, {Topic: "a", Partition: 0, Replicas: []int32{2, 1}}}},
			code: invalidRequest, msg: "a-0 is listed twice"},
		{name: "negative partition", cmd: fsmtest.RecordOrder("a", -1, 1), code: invalidRequest, msg: "partition -1 of topic a is negative"},
		{name: "no replicas", cmd: fsmtest.RecordOrder("a", 0), code: invalidRequest, msg: "replica order of a-0 is empty"},
		{name: "negative broker", cmd: fsmtest.RecordOrder("a", 0, 1, -2), code: invalidRequest, msg: "negative broker ID -2"},
		{name: "bad topic name", cmd: fsmtest.RecordOrder("a b", 0, 1), code: invalidRequest, msg: "illegal character"},
	})
}

func TestApplyClearReplicaOrder(t *testing.T) {
	both := []fsm.Command{fsmtest.RecordOrder("a", 0, 2, 1, 3), fsmtest.RecordOrder("a", 1, 3, 1, 2)}
	deleteM1 := []fsm.Command{fsmtest.RecordOrder("s", 0, 2, 1), fsm.SetTopicStatus{Mirror: "m1", Topics: []string{"a", "p"}, Status: fsm.TopicStopped}, fsm.DeleteMirror{Name: "m1"}}
	runApplyCases(t, []applyCase{
		{name: "clears one", setup: both, cmd: clearOrder("a", 0),
			check: wantMoved(map[string]map[int32][]int32{"a": {1: {3, 1, 2}}})},
		{name: "clears the last", setup: both, cmd: fsm.ClearReplicaOrder{Partitions: []fsm.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}},
			check: wantMoved(nil)},
		{name: "nothing recorded is a no-op", cmd: clearOrder("a", 0), check: wantMoved(nil)},
		{name: "a record outlives its topic", setup: deleteM1, cmd: clearOrder("s", 1),
			check: func(t *testing.T, _, s *fsm.State) {
				if s.Topics["s"] != nil {
					t.Fatal("topic s was not deleted")
				}
				wantMoved(map[string]map[int32][]int32{"s": {0: {2, 1}}})(t, nil, s)
			}},
		{name: "deleted topic", setup: deleteM1, cmd: clearOrder("s", 0), check: wantMoved(nil)},
		{name: "no partition", cmd: fsm.ClearReplicaOrder{}, code: invalidRequest, msg: "names no partition"},
		{name: "negative partition", setup: both, cmd: clearOrder("a", -1), code: invalidRequest, msg: "negative"},
		{name: "bad topic name", setup: both, cmd: clearOrder("", 0), code: invalidRequest, msg: "topic name is empty"},
	})
}

func TestStateValidateMovedPartitions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		moved map[string]map[int32][]int32
		want  string
	}{
		{"nil", nil, ""},
		{"empty map", map[string]map[int32][]int32{}, ""},
		{"valid", map[string]map[int32][]int32{"gone": {3: {1, 2}}}, ""},
		{"empty topic entry", map[string]map[int32][]int32{"a": {}}, "empty entry"},
		{"duplicate broker", map[string]map[int32][]int32{"a": {0: {1, 1}}}, "twice"},
		{"negative partition", map[string]map[int32][]int32{"a": {-1: {1}}}, "negative"},
		{"bad name", map[string]map[int32][]int32{"..": {0: {1}}}, "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fsmtest.State(t)
			s.MovedPartitions = tc.moved
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v", err)
			case tc.want != "" && (!errors.Is(err, fsm.ErrInvalidState) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want ErrInvalidState containing %q", err, tc.want)
			}
		})
	}
}

func TestCloneMovedPartitions(t *testing.T) {
	s := fsmtest.State(t)
	fsmtest.MustApply(t, s, fsmtest.RecordOrder("a", 0, 2, 1, 3))
	c := s.Clone()
	c.MovedPartitions["a"][0][0] = 9
	c.MovedPartitions["a"][1] = []int32{1}
	if got, _ := s.MovedReplicas("a", 0); !slices.Equal(got, []int32{2, 1, 3}) || len(s.MovedPartitions["a"]) != 1 {
		t.Fatalf("the clone shares memory: %v", s.MovedPartitions)
	}
	if fsm.NewState().Clone().MovedPartitions != nil {
		t.Fatal("the clone of an empty state has moved partitions")
	}
}

func TestSnapshotMovedPartitions(t *testing.T) {
	src := fixtureFSM(t)
	n := uint64(len(fsmtest.Commands()))
	for i, c := range []fsm.Command{fsmtest.RecordOrder("a", 0, 2, 1, 3), fsmtest.RecordOrder("b", 4, 3, 2), fsmtest.RecordOrder("a", 2, 1, 3)} {
		if res := src.Apply(n+uint64(i)+1, fsmtest.MustEncode(t, c)); res.ErrorCode != 0 {
			t.Fatal(res.ErrorMessage)
		}
	}
	data := snapshotBytes(t, src)
	dst := fsm.New(nil)
	if _, err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	want := map[string]map[int32][]int32{"a": {0: {2, 1, 3}, 2: {1, 3}}, "b": {4: {3, 2}}}
	if got := readState(dst); !reflect.DeepEqual(got, readState(src)) || !reflect.DeepEqual(got.MovedPartitions, want) {
		t.Fatalf("restored moved partitions %v, want %v", got.MovedPartitions, want)
	}

	// A state without moves writes no field: snapshots of sidecars that do
	// not know it still read the same, and restore to nil.
	plain := string(snapshotBytes(t, fixtureFSM(t)))
	if strings.Contains(plain, "movedPartitions") {
		t.Fatalf("a snapshot without moves names the field: %s", plain)
	}
	if _, err := dst.Restore(strings.NewReader(plain)); err != nil {
		t.Fatal(err)
	}
	if readState(dst).MovedPartitions != nil {
		t.Fatal("restoring a snapshot without moves kept the old ones")
	}

	bad := strings.Replace(string(data), `"2":[1,3]`, `"2":[3,3]`, 1)
	if bad == string(data) {
		t.Fatalf("test setup: the snapshot does not hold the expected text: %s", data)
	}
	if _, err := dst.Restore(strings.NewReader(bad)); !errors.Is(err, fsm.ErrInvalidSnapshot) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("Restore of a snapshot with a bad replica order = %v, want ErrInvalidSnapshot", err)
	}
}
