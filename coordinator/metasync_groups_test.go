package coordinator

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
)

// TestGroupOffsetsOutOfHoles moves committed offsets of compacted topics to
// the next live record before clamping and comparing with the destination.
func TestGroupOffsetsOutOfHoles(t *testing.T) {
	resp := func(entries ...kadm.Offset) kadm.OffsetResponses {
		rs := kadm.OffsetResponses{}
		for _, o := range entries {
			if rs[o.Topic] == nil {
				rs[o.Topic] = map[int32]kadm.OffsetResponse{}
			}
			rs[o.Topic][o.Partition] = kadm.OffsetResponse{Offset: o}
		}
		return rs
	}
	source := resp(
		kadm.Offset{Topic: "c", Partition: 0, At: 5},   // in a hole: live record at 9
		kadm.Offset{Topic: "c", Partition: 1, At: 7},   // already moved on the destination
		kadm.Offset{Topic: "c", Partition: 2, At: 95},  // the live record is beyond the high watermark
		kadm.Offset{Topic: "c", Partition: 3, At: 100}, // at the high watermark: not looked up
	)
	live := map[int32]int64{0: 9, 1: 12, 2: 120}
	var asked []int32
	lookup := func(topic string, p int32, at, end int64) int64 {
		if at >= end {
			return at
		}
		asked = append(asked, p)
		return live[p]
	}
	topics := map[string]*fsm.MirrorTopic{"c": {Name: "c", Partitions: 4}}
	hw := map[string]map[int32]int64{"c": {0: 100, 1: 100, 2: 100, 3: 100}}
	dest := resp(kadm.Offset{Topic: "c", Partition: 1, At: 12, LeaderEpoch: -1})
	got := groupOffsetsToCommit(source, topics, hw, dest, lookup)
	want := kadm.Offsets{"c": {
		0: {Topic: "c", Partition: 0, At: 9, LeaderEpoch: -1},
		2: {Topic: "c", Partition: 2, At: 100, LeaderEpoch: -1},
		3: {Topic: "c", Partition: 3, At: 100, LeaderEpoch: -1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groupOffsetsToCommit:\n got %+v\nwant %+v", got, want)
	}
	for _, p := range asked {
		if p == 3 {
			t.Fatal("an offset at the high watermark was looked up")
		}
	}
}
