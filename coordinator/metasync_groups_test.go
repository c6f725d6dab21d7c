package coordinator

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/fetcher"
	"github.com/sidemirror/sidemirror/protocol"
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

// fakeStates is a stateReader over fixed persisted states.
type fakeStates map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition

func (s fakeStates) readStatesOf(_ context.Context, req *protocol.ReadMirrorStatesRequest) (map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition, error) {
	out := map[fetcher.Partition]protocol.ReadMirrorStatesResponsePartition{}
	for p, v := range s {
		if p.Mirror == req.MirrorName {
			out[p] = v
		}
	}
	return out, nil
}

// TestTranslateOffsetRepeatedMarker checks fetcher.TranslateOffset with the
// negative shifts of markers a destination coordinator wrote twice: from
// each repeat on, destination offsets are one higher than the source's.
func TestTranslateOffsetRepeatedMarker(t *testing.T) {
	for _, tc := range []struct {
		m         []fetcher.OffsetShift
		src, want int64
	}{
		{[]fetcher.OffsetShift{{Source: 11, Destination: 12}}, 0, 0},
		{[]fetcher.OffsetShift{{Source: 11, Destination: 12}}, 10, 10},
		{[]fetcher.OffsetShift{{Source: 11, Destination: 12}}, 11, 12},
		{[]fetcher.OffsetShift{{Source: 11, Destination: 12}}, 20, 21},
		// A second repeat before source offset 21.
		{[]fetcher.OffsetShift{{Source: 11, Destination: 12}, {Source: 21, Destination: 23}}, 20, 21},
		{[]fetcher.OffsetShift{{Source: 11, Destination: 12}, {Source: 21, Destination: 23}}, 21, 23},
		{[]fetcher.OffsetShift{{Source: 11, Destination: 12}, {Source: 21, Destination: 23}}, 30, 32},
	} {
		if got := fetcher.TranslateOffset(tc.m, tc.src); got != tc.want {
			t.Errorf("TranslateOffset(%v, %d) = %d, want %d", tc.m, tc.src, got, tc.want)
		}
	}
}

// TestOffsetMapsOf returns every partition's map in translate mode, and in
// exact mode only the partitions with a map (nil when none has one).
func TestOffsetMapsOf(t *testing.T) {
	ctx := context.Background()
	p0 := fetcher.Partition{Mirror: "m", Topic: "t", Partition: 0}
	p1 := fetcher.Partition{Mirror: "m", Topic: "t", Partition: 1}
	shifted := fakeStates{
		p0: {PartitionIndex: 0, OffsetMap: []protocol.OffsetShift{{SourceOffset: 11, DestinationOffset: 12}}},
		p1: {PartitionIndex: 1},
	}
	plain := fakeStates{p0: {PartitionIndex: 0}, p1: {PartitionIndex: 1}}
	exact := &fsm.Mirror{Name: "m", Config: map[string]string{}}
	translate := &fsm.Mirror{Name: "m", Config: map[string]string{fsm.OffsetsKey: "translate"}}
	for _, tc := range []struct {
		name   string
		states fakeStates
		m      *fsm.Mirror
		want   map[fetcher.Partition][]fetcher.OffsetShift
	}{
		{"exact, no map", plain, exact, nil},
		{"exact, one partition with a map", shifted, exact, map[fetcher.Partition][]fetcher.OffsetShift{p0: {{Source: 11, Destination: 12}}}},
		{"translate: every partition", shifted, translate, map[fetcher.Partition][]fetcher.OffsetShift{p0: {{Source: 11, Destination: 12}}, p1: nil}},
		{"translate, no map", plain, translate, map[fetcher.Partition][]fetcher.OffsetShift{p0: nil, p1: nil}},
	} {
		got, err := offsetMapsOf(ctx, tc.states, tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: offsetMapsOf = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestShiftedLive moves an exact-mode offset out of a compaction hole
// first (a source offset), then translates it with the partition's map.
func TestShiftedLive(t *testing.T) {
	maps := map[fetcher.Partition][]fetcher.OffsetShift{{Mirror: "m", Topic: "c", Partition: 0}: {{Source: 11, Destination: 12}}}
	hole := func(_ string, _ int32, at, _ int64) int64 {
		if at >= 5 && at < 15 {
			return 15 // the live record after the hole
		}
		return at
	}
	for _, tc := range []struct {
		name     string
		live     liveFunc
		p        int32
		at, want int64
	}{
		{"no compaction, below the repeat", nil, 0, 10, 10},
		{"no compaction, after the repeat", nil, 0, 20, 21},
		{"out of the hole, then translated", hole, 0, 7, 16},
		{"a partition without a map", hole, 1, 7, 15},
		{"a partition without a map, no compaction", nil, 1, 20, 20},
	} {
		if got := shiftedLive("m", tc.live, maps)("c", tc.p, tc.at, 100); got != tc.want {
			t.Errorf("%s: %d -> %d, want %d", tc.name, tc.at, got, tc.want)
		}
	}
}

// TestSyncGroupOffsetsRepeatedMarker syncs an exact-mode mirror against
// kfake clusters where partition 0's destination has one extra control
// batch (a repeated marker, offset map {11 -> 12}): its committed offset is
// translated, partition 1's is copied as it is.
func TestSyncGroupOffsetsRepeatedMarker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, dst := kfakeClient(t, 2), kfakeClient(t, 2)
	for p := range int32(2) {
		for range 30 {
			if err := dst.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	srcAdm, dstAdm := kadm.NewClient(src), kadm.NewClient(dst)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 20, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "t", Partition: 1, At: 20, LeaderEpoch: -1})
	if resp, err := srcAdm.CommitOffsets(ctx, "g", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit on the source: %v, %v", err, resp.Error())
	}
	m := &fsm.Mirror{Name: "m", Config: map[string]string{}} // mirror.offsets=exact, the default
	states := fakeStates{
		{Mirror: "m", Topic: "t", Partition: 0}: {PartitionIndex: 0, OffsetMap: []protocol.OffsetShift{{SourceOffset: 11, DestinationOffset: 12}}},
		{Mirror: "m", Topic: "t", Partition: 1}: {PartitionIndex: 1},
	}
	maps, err := offsetMapsOf(ctx, states, m)
	if err != nil {
		t.Fatal(err)
	}
	topics := map[string]*fsm.MirrorTopic{"t": {Name: "t", Mirror: "m", Partitions: 2, Status: fsm.TopicActive}}
	n, err := syncGroupOffsets(ctx, zap.NewNop(), m, srcAdm, dstAdm, topics, src, maps)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("committed %d offsets, want 2", n)
	}
	got, err := dstAdm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 21, 1: 20} {
		if o, ok := got.Lookup("t", p); !ok || o.At != want {
			t.Errorf("g t-%d on the destination = %+v (found %v), want offset %d", p, o.Offset, ok, want)
		}
	}
	// A second round has nothing to do.
	if n, err := syncGroupOffsets(ctx, zap.NewNop(), m, srcAdm, dstAdm, topics, src, maps); err != nil || n != 0 {
		t.Errorf("second round: %d commits, %v; want 0, nil", n, err)
	}
}
