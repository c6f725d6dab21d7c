package coordinator

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/coordinator/fsm"
	"github.com/sidemirror/sidemirror/coordinator/fsm/fsmtest"
)

// TestApplyDiverged checks that StartTopics records diverged partitions and
// SetDiverged sets and clears them, with their validation.
func TestApplyDiverged(t *testing.T) {
	s := fsmtest.State(t)
	dv := []fsm.Divergence{{Partition: 1, Offset: 10, Extra: 5, Exact: true}}
	fsmtest.MustApply(t, s, fsm.StartTopics{Mirror: "m1", Topics: []fsm.StartTopic{{Name: "d", Partitions: 2, Diverged: dv}}, NowMs: 5000})
	if got := s.Topics["d"]; got.Status != fsm.TopicActive || !reflect.DeepEqual(got.Diverged, dv) {
		t.Fatalf("started diverged topic = %+v, want active with %v", got, dv)
	}
	if c := s.Clone(); &c.Topics["d"].Diverged[0] == &s.Topics["d"].Diverged[0] {
		t.Fatal("Clone shares Diverged")
	}

	for _, tc := range []struct {
		name string
		cmd  fsm.Command
		code int16
		msg  string
	}{
		{"unknown mirror", fsm.SetDiverged{Mirror: "x", Topic: "d"}, kerr.ResourceNotFound.Code, "x"},
		{"unknown topic", fsm.SetDiverged{Mirror: "m1", Topic: "x"}, kerr.UnknownTopicOrPartition.Code, "x"},
		{"other mirror", fsm.SetDiverged{Mirror: "m2", Topic: "d"}, kerr.InvalidRequest.Code, "belongs to mirror m1"},
		{"stopped", fsm.SetDiverged{Mirror: "m1", Topic: "s"}, kerr.InvalidRequest.Code, "only an active topic"},
		{"no such partition", fsm.SetDiverged{Mirror: "m1", Topic: "d", Diverged: []fsm.Divergence{{Partition: 2, Offset: 1, Extra: 1}}}, kerr.InvalidRequest.Code, "partition 2 does not exist"},
		{"twice", fsm.SetDiverged{Mirror: "m1", Topic: "d", Diverged: []fsm.Divergence{{Partition: 0, Extra: 1}, {Partition: 0, Extra: 2}}}, kerr.InvalidRequest.Code, "listed twice"},
		{"no extra", fsm.SetDiverged{Mirror: "m1", Topic: "d", Diverged: []fsm.Divergence{{Partition: 0, Offset: 3}}}, kerr.InvalidRequest.Code, "not a divergence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Clone()
			res := fsm.ApplyTo(s, fsmtest.MustEncode(t, tc.cmd))
			if res.ErrorCode != tc.code || !strings.Contains(res.ErrorMessage, tc.msg) {
				t.Fatalf("apply = %+v, want code %d with %q", res, tc.code, tc.msg)
			}
			if !reflect.DeepEqual(s, before) {
				t.Fatal("state changed")
			}
		})
	}
	res := fsm.ApplyTo(s, fsmtest.MustEncode(t, fsm.StartTopics{Mirror: "m1", Topics: []fsm.StartTopic{{Name: "e", Partitions: 1, Diverged: []fsm.Divergence{{Partition: 1, Extra: 1}}}}}))
	if len(res.Topics) != 1 || res.Topics[0].ErrorCode != kerr.InvalidRequest.Code || s.Topics["e"] != nil {
		t.Fatalf("StartTopics with a divergence on a missing partition = %+v, topic %+v", res, s.Topics["e"])
	}

	fsmtest.MustApply(t, s, fsm.SetDiverged{Mirror: "m1", Topic: "d", NowMs: 6000})
	if got := s.Topics["d"]; got.Diverged != nil || got.StartedMs != 6000 || got.UpdatedMs != 6000 {
		t.Fatalf("cleared = %+v, want no divergence, started and updated at 6000", got)
	}
	fsmtest.MustApply(t, s, fsm.SetDiverged{Mirror: "m1", Topic: "d", Diverged: dv, NowMs: 7000})
	if got := s.Topics["d"]; !reflect.DeepEqual(got.Diverged, dv) || got.StartedMs != 6000 {
		t.Fatalf("set again = %+v", got)
	}
}

// TestDrivenTopics checks that no partition of a topic with diverged
// partitions is driven, and that it is once the divergence is cleared.
func TestDrivenTopics(t *testing.T) {
	s := fsmtest.State(t)
	fsmtest.MustApply(t, s, fsm.StartTopics{Mirror: "m1", Topics: []fsm.StartTopic{{Name: "d", Partitions: 2,
		Diverged: []fsm.Divergence{{Partition: 0, Offset: 1, Extra: 1, Exact: true}}}}, NowMs: 5000})
	if got := drivenTopics(s); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("driven topics %v, want [a b]", got)
	}
	fsmtest.MustApply(t, s, fsm.SetDiverged{Mirror: "m1", Topic: "d", NowMs: 6000})
	if got := drivenTopics(s); !reflect.DeepEqual(got, []string{"a", "b", "d"}) {
		t.Fatalf("driven topics after the re-seed %v, want [a b d]", got)
	}
}

// TestDivergedRow checks describe's rows of a topic with a diverged
// partition: every partition FAILED, the diverged one with its divergence.
func TestDivergedRow(t *testing.T) {
	mt := &fsm.MirrorTopic{Name: "orders", Partitions: 3, Status: fsm.TopicActive,
		Diverged: []fsm.Divergence{{Partition: 1, Offset: 1180, Extra: 20, Exact: true}}}
	d := divergedRow(mt, 1)
	if d.State != "FAILED" || d.PartitionIndex != 1 || d.LastError == nil ||
		!strings.HasPrefix(*d.LastError, "partition 1 diverged at offset 1180: this cluster has 20 records from there on that the source does not have;") ||
		!strings.Contains(*d.LastError, "--start --reseed --topics orders") || !strings.Contains(*d.LastError, "orders.diverged-<timestamp>") {
		t.Fatalf("diverged partition row = %+v (%s)", d, strOrNil(d.LastError))
	}
	d = divergedRow(mt, 0)
	if d.State != "FAILED" || d.LastError == nil || !strings.HasPrefix(*d.LastError, "not mirrored: partition 1 of topic orders diverged") {
		t.Fatalf("other partition row = %+v (%s)", d, strOrNil(d.LastError))
	}
}

func strOrNil(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestDivergedTopicName(t *testing.T) {
	now := time.Date(2026, 3, 14, 10, 15, 0, 0, time.FixedZone("x", 3600))
	got, err := divergedTopicName("orders", now)
	if err != nil || got != "orders.diverged-20260314T091500Z" {
		t.Fatalf("divergedTopicName = %q, %v", got, err)
	}
	if _, err := divergedTopicName(strings.Repeat("t", 230), now); err == nil || !strings.Contains(err.Error(), "249") {
		t.Fatalf("a name too long: %v", err)
	}
}

// reseedFixture is a source and a destination (kfake) holding topic "t"
// with two partitions: partition 0 agrees, partition 1 diverged at offset 3
// (the destination has 4 records of its own from there on).
type reseedFixture struct {
	s        *admin
	src, dst *kgo.Client
	srcAddr  string
	dstFake  *kfake.Cluster // the destination cluster, for control functions
	now      time.Time
}

func newReseedFixture(t *testing.T) *reseedFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var fakes []*kfake.Cluster
	cluster := func() *kgo.Client {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		fakes = append(fakes, c)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	f := &reseedFixture{src: cluster(), dst: cluster(), now: time.Date(2026, 3, 14, 10, 15, 0, 0, time.UTC)}
	f.srcAddr, f.dstFake = strings.Join(fakes[0].ListenAddrs(), ","), fakes[1]
	write := func(cl *kgo.Client, p int32, prefix string, from, n int) {
		for i := from; i < from+n; i++ {
			r := &kgo.Record{Topic: "t", Partition: p, Key: []byte(prefix + "k" + string(rune('a'+i))), Value: []byte(prefix + "v"),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}, Timestamp: time.UnixMilli(int64(1_600_000_000_000 + i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, cl := range []*kgo.Client{f.src, f.dst} {
		write(cl, 0, "", 0, 5)
		write(cl, 1, "", 0, 3)
	}
	write(f.src, 1, "src-", 3, 6)
	write(f.dst, 1, "dst-", 3, 4)
	f.s = &admin{dest: NewDestination(f.dst, ""), destCl: f.dst, now: func() time.Time { return f.now }, log: zaptest.NewLogger(t)}
	return f
}

// records reads every record of topic-p on cl.
func readAll(t *testing.T, cl *kgo.Client, topic string, p int32) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := end.Lookup(topic, p)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	c, err := kgo.NewClient(append(cl.Opts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []*kgo.Record
	for int64(len(out)) < o.Offset {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s-%d", len(out), o.Offset, topic, p)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestReseed re-seeds the fixture's topic: the divergent records of
// partition 1 land in t.diverged-<time> with keys, values, headers and
// timestamps, and the destination topic is re-created empty.
func TestReseed(t *testing.T) {
	f := newReseedFixture(t)
	ctx := context.Background()
	found, dl, err := f.s.findDivergences(ctx, f.src, "t", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []fsm.Divergence{{Partition: 1, Offset: 3, Extra: 4, Exact: true}}
	if !reflect.DeepEqual(found, want) {
		t.Fatalf("divergences = %v, want %v", found, want)
	}
	diverged := readAll(t, f.dst, "t", 1)[3:]

	got, err := f.s.reseed(ctx, f.src, SourceTopic{Name: "t", Partitions: 2}, -1, found, dl)
	if err != nil {
		t.Fatalf("reseed: %v", err)
	}
	const copyName = "t.diverged-20260314T101500Z"
	if got.Name != "t" || got.CopyTopic != copyName || len(got.Partitions) != 1 ||
		got.Partitions[0].Partition != 1 || got.Partitions[0].FirstOffset != 3 || got.Partitions[0].EndOffset != 7 || got.Partitions[0].Records != 4 {
		t.Fatalf("reseed reported %+v", got)
	}
	copied := readAll(t, f.dst, copyName, 1)
	if len(copied) != len(diverged) {
		t.Fatalf("the copy holds %d records, want %d", len(copied), len(diverged))
	}
	for i, r := range copied {
		o := diverged[i]
		if r.Offset != int64(i) || string(r.Key) != string(o.Key) || string(r.Value) != string(o.Value) ||
			!reflect.DeepEqual(r.Headers, o.Headers) || !r.Timestamp.Equal(o.Timestamp) {
			t.Fatalf("copy record %d = %+v, want the content of %+v", i, r, o)
		}
	}
	if n := len(readAll(t, f.dst, copyName, 0)); n != 0 {
		t.Fatalf("partition 0 of the copy holds %d records, want none (it did not diverge)", n)
	}
	ex, err := f.s.dest.DescribeTopic(ctx, "t")
	if err != nil || ex == nil || !ex.Empty || ex.Partitions != 2 {
		t.Fatalf("re-created topic = %+v, %v; want empty with 2 partitions", ex, err)
	}
}

// TestReseedCopyFails makes the copy fail (its topic exists already): the
// destination topic must keep every record.
func TestReseedCopyFails(t *testing.T) {
	f := newReseedFixture(t)
	ctx := context.Background()
	if err := f.s.dest.CreateTopic(ctx, "t.diverged-20260314T101500Z", 1, -1, nil); err != nil {
		t.Fatal(err)
	}
	found, dl, err := f.s.findDivergences(ctx, f.src, "t", 2)
	if err != nil || len(found) != 1 {
		t.Fatalf("divergences %v, %v", found, err)
	}
	got, err := f.s.reseed(ctx, f.src, SourceTopic{Name: "t", Partitions: 2}, -1, found, dl)
	if err == nil || got != nil || !strings.Contains(err.Error(), "so topic t was not deleted") {
		t.Fatalf("reseed = %+v, %v; want a copy error", got, err)
	}
	ends, err := f.s.dest.EndOffsets(ctx, "t")
	if err != nil || ends[0] != 5 || ends[1] != 7 {
		t.Fatalf("destination end offsets after a failed copy = %v, %v; want 5 and 7", ends, err)
	}
}

// TestPrepareDestinationReseedRefused checks that --reseed is refused where
// nothing diverged, and that without it a diverged topic is reported, not
// changed.
func TestPrepareDestinationReseedRefused(t *testing.T) {
	f := newReseedFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		topic SourceTopic
		want  string
	}{
		{SourceTopic{Name: "absent", Partitions: 1}, "destination topic absent does not exist: nothing to re-seed"},
	} {
		_, copied, err := f.s.prepareDestination(ctx, f.src, tc.topic, -1, true)
		if err == nil || copied != nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("prepareDestination(%s, reseed) = %v; want %q", tc.topic.Name, err, tc.want)
		}
	}
	// Partition 1 diverged: without --reseed it is reported, nothing changes.
	found, copied, err := f.s.prepareDestination(ctx, f.src, SourceTopic{Name: "t", Partitions: 2}, -1, false)
	if err != nil || copied != nil || len(found) != 1 || found[0].Partition != 1 {
		t.Fatalf("prepareDestination(t) = %v, %+v, %v", found, copied, err)
	}
	if msg := divergenceMessage("t", found, true); !strings.Contains(msg, "partition 1 diverged at offset 3: this cluster has 4 records") ||
		!strings.Contains(msg, "--start --reseed copies those records to t.diverged-<timestamp>") {
		t.Fatalf("message %q", msg)
	}
	// An empty destination topic, and one that holds a prefix of the
	// source's: --reseed is refused.
	for _, cl := range []*kgo.Client{f.src, f.dst} {
		if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, -1, nil, "e", "u"); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = f.s.prepareDestination(ctx, f.src, SourceTopic{Name: "e", Partitions: 1}, -1, true)
	if err == nil || !strings.Contains(err.Error(), "destination topic e is empty: nothing to re-seed") {
		t.Fatalf("prepareDestination(empty e, reseed) = %v", err)
	}
	for i, cl := range []*kgo.Client{f.src, f.dst, f.src} {
		r := &kgo.Record{Topic: "u", Key: []byte{byte(i)}, Timestamp: time.UnixMilli(int64(1_600_000_000_000 + i))}
		if cl == f.dst {
			r.Key = []byte{0}
			r.Timestamp = time.UnixMilli(1_600_000_000_000)
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = f.s.prepareDestination(ctx, f.src, SourceTopic{Name: "u", Partitions: 1}, -1, true)
	if err == nil || !strings.Contains(err.Error(), "destination topic u holds a prefix of the source topic's log (it has not diverged)") {
		t.Fatalf("prepareDestination(prefix u, reseed) = %v", err)
	}
}
