package fetcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceOverwrites writes n records over a few keys (tombstones now and
// then) to topic/0 with every codec, in batches of 1..12 records.
func (e *testEnv) produceOverwrites(rng *rand.Rand, topic string, from, n int) {
	e.t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; {
		cl := e.producer(codecs[rng.IntN(len(codecs))].codec)
		var recs []*kgo.Record
		for range 1 + rng.IntN(12) {
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", rng.IntN(15)), Value: fmt.Appendf(nil, "value %d", i)}
			switch {
			case i%11 == 0:
				r.Value = nil // tombstone
			case i%7 == 0:
				r.Headers = []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}, {Key: "null"}}
			}
			recs = append(recs, r)
			i++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// compactSource makes topic on the source compacted, tombstones included.
func (e *testEnv) compactSource(topic string) {
	e.t.Helper()
	v, zero := "compact", "0"
	if _, err := e.srcAdm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &v},
		{Op: kadm.SetConfig, Name: "delete.retention.ms", Value: &zero},
	}, topic); err != nil {
		e.t.Fatal(err)
	}
}

// sourceHoles counts the holes of the source partition's log: offsets
// between its start and end that no record holds.
func (e *testEnv) sourceHoles(topic string) (holes int64, holedBatches int) {
	e.t.Helper()
	start := e.offsets(e.srcAdm, true, topic)[0]
	next := start
	for _, b := range e.rawBatches(e.src, e.srcCl, topic, 0, start) {
		rb, err := parseBatch(b)
		if err != nil {
			e.t.Fatal(err)
		}
		holes += rb.FirstOffset - next + int64(rb.LastOffsetDelta) + 1 - int64(rb.NumRecords)
		if int64(rb.NumRecords) != int64(rb.LastOffsetDelta)+1 {
			holedBatches++
		}
		next = batchNext(b)
	}
	return holes, holedBatches
}

// compareCompacted checks D2 on a compacted source: the destination has the
// source's start and end offsets and every offset in between; each holds the
// source record at that offset or, in a hole, a copy of the next source
// record after it.
func (e *testEnv) compareCompacted(topic string) (live, copies int) {
	e.t.Helper()
	srcStart, dstStart := e.offsets(e.srcAdm, true, topic)[0], e.offsets(e.dstAdm, true, topic)[0]
	srcEnd, dstEnd := e.offsets(e.srcAdm, false, topic)[0], e.offsets(e.dstAdm, false, topic)[0]
	if srcStart != dstStart || srcEnd != dstEnd {
		e.t.Fatalf("source offsets %d..%d, destination %d..%d", srcStart, srcEnd, dstStart, dstEnd)
	}
	src, dst := e.readAll(e.src, e.srcAdm, topic)[0], e.readAll(e.dst, e.dstAdm, topic)[0]
	markers := len(e.markers(e.dst, e.dstCl, topic))
	if int64(len(dst)+markers) != dstEnd-dstStart {
		e.t.Fatalf("destination holds %d records and %d transaction markers for offsets %d..%d", len(dst), markers, dstStart, dstEnd-1)
	}
	i := 0
	for _, d := range dst {
		for i < len(src) && src[i].Offset < d.Offset {
			i++
		}
		if i == len(src) {
			e.t.Fatalf("destination offset %d: beyond the last source record", d.Offset)
		}
		s := src[i]
		if !sameBytes(s.Key, d.Key) || !sameBytes(s.Value, d.Value) || !s.Timestamp.Equal(d.Timestamp) || len(s.Headers) != len(d.Headers) {
			e.t.Fatalf("destination offset %d holds %q=%q %v, want (a copy of) source offset %d %q=%q %v",
				d.Offset, d.Key, d.Value, d.Timestamp, s.Offset, s.Key, s.Value, s.Timestamp)
		}
		for j := range s.Headers {
			if s.Headers[j].Key != d.Headers[j].Key || !sameBytes(s.Headers[j].Value, d.Headers[j].Value) {
				e.t.Fatalf("destination offset %d: header %d differs", d.Offset, j)
			}
		}
		if s.Offset == d.Offset {
			live++
		} else {
			copies++
		}
	}
	if live != len(src) {
		e.t.Fatalf("%d of %d source records found at their offsets", live, len(src))
	}
	return live, copies
}

// TestCompactedSource mirrors a source partition that kfake compacted:
// holes between batches and inside them (kfake keeps a batch's base offset
// and drops trailing holes), before and after the partition starts.
func TestCompactedSource(t *testing.T) {
	const topic = "compacted"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	ctx := context.Background()
	e.compactSource(topic)
	rng := rand.New(rand.NewPCG(3, 4))
	e.produceOverwrites(rng, topic, 0, 600)
	e.src.Compact()
	holes, holed := e.sourceHoles(topic)
	if holes == 0 || holed == 0 {
		t.Fatalf("compaction left %d holes, %d batches with holes inside", holes, holed)
	}

	m := e.newManager()
	p := Partition{testMirror, topic, 0}
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})
	live, copies := e.compareCompacted(topic)
	st := waitState(t, m, p, StateMirroring)
	rebuilt := metricValue(t, m.met.rebuilt.WithLabelValues(testMirror, topic))
	t.Logf("first pass: %d holes (%d batches with holes inside); %d live records, %d copies; FillerRecords %d, rebuilt batches %v",
		holes, holed, live, copies, st.FillerRecords, rebuilt)
	if rebuilt == 0 || st.RecordsMirrored != int64(live) {
		t.Fatalf("rebuilt %v, RecordsMirrored %d, want > 0 and %d", rebuilt, st.RecordsMirrored, live)
	}
	if got := metricValue(t, m.met.fillers.WithLabelValues(testMirror, topic)); got != float64(st.FillerRecords) {
		t.Fatalf("sidemirror_filler_records_total = %v, FillerRecords %d", got, st.FillerRecords)
	}

	// Overwrites while mirroring, then new holes behind a stopped partition,
	// where the destination log end offset may fall into a hole.
	e.produceOverwrites(rng, topic, 600, 300)
	e.waitCaughtUp(m, topic, []int32{0})
	if err := m.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	e.produceOverwrites(rng, topic, 900, 400)
	e.src.Compact()
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})
	live, copies = e.compareCompacted(topic)
	t.Logf("second pass: %d live records, %d copies", live, copies)
}

// TestNextLiveOffset checks NextLiveOffset against every offset of a
// compacted partition: the answer is the first record a consumer reads from
// there.
func TestNextLiveOffset(t *testing.T) {
	const topic = "nextlive"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	ctx := context.Background()
	e.compactSource(topic)
	rng := rand.New(rand.NewPCG(11, 12))
	e.produceOverwrites(rng, topic, 0, 300)
	e.src.Compact()
	if holes, _ := e.sourceHoles(topic); holes == 0 {
		t.Fatal("compaction left no holes")
	}
	recs := e.readAll(e.src, e.srcAdm, topic)[0]
	end := e.offsets(e.srcAdm, false, topic)[0]
	i := 0
	for at := e.offsets(e.srcAdm, true, topic)[0]; at <= end; at++ {
		for i < len(recs) && recs[i].Offset < at {
			i++
		}
		want := at // past the last record: at itself
		if i < len(recs) {
			want = recs[i].Offset
		}
		got, err := NextLiveOffset(ctx, e.srcCl, topic, 0, at)
		if err != nil {
			t.Fatalf("NextLiveOffset(%d): %v", at, err)
		}
		if got != want {
			t.Fatalf("NextLiveOffset(%d) = %d, want %d", at, got, want)
		}
	}
}

// markers returns the transaction markers of topic-0 on c by offset: true
// for COMMIT.
func (e *testEnv) markers(c *kfake.Cluster, cl *kgo.Client, topic string) map[int64]bool {
	e.t.Helper()
	out := map[int64]bool{}
	adm := e.srcAdm
	if c == e.dst {
		adm = e.dstAdm
	}
	for _, b := range e.rawBatches(c, cl, topic, 0, e.offsets(adm, true, topic)[0]) {
		rb, err := parseBatch(b)
		if err != nil {
			e.t.Fatal(err)
		}
		if rb.Attributes&attrControl == 0 || rb.NumRecords == 0 {
			continue
		}
		commit, err := markerCommits(&rb)
		if err != nil {
			e.t.Fatal(err)
		}
		out[rb.FirstOffset] = commit
	}
	return out
}

// TestCompactedTransactions mirrors a compacted source partition written
// by a transactional producer (commits and aborts) between plain batches,
// after compaction left holes before markers, before transactional batches
// and inside them: every offset holds the source's record, a copy of the
// next live one, or the source's marker with the same outcome.
func TestCompactedTransactions(t *testing.T) {
	const topic = "compacted-txn"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	ctx := context.Background()
	e.compactSource(topic)
	txn := e.producer(kgo.SnappyCompression(), kgo.TransactionalID("compacted-txn"))
	rng := rand.New(rand.NewPCG(21, 22))
	for i := range 40 {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for j := range 1 + rng.IntN(8) {
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", rng.IntN(6)), Value: fmt.Appendf(nil, "txn %d/%d", i, j)})
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryCommit
		if i%3 == 2 {
			end = kgo.TryAbort
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			e.produceOverwrites(rng, topic, 0, 10)
		}
	}
	e.produceOverwrites(rng, topic, 0, 5) // the log ends with a live record
	e.src.Compact()
	holes, holed := e.sourceHoles(topic)
	srcMarkers := e.markers(e.src, e.srcCl, topic)
	t.Logf("source: %d holes, %d batches with holes inside, %d markers", holes, holed, len(srcMarkers))
	if holes == 0 || len(srcMarkers) == 0 {
		t.Fatalf("compaction left %d holes and %d markers", holes, len(srcMarkers))
	}

	m := e.newManager()
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})
	if dstMarkers := e.markers(e.dst, e.dstCl, topic); fmt.Sprint(dstMarkers) != fmt.Sprint(srcMarkers) {
		t.Fatalf("markers differ:\nsource      %v\ndestination %v", srcMarkers, dstMarkers)
	}
	live, copies := e.compareCompacted(topic)
	t.Logf("destination: %d live records, %d copies, %d markers", live, copies, len(srcMarkers))
}

// TestFillersShareTheTransaction fills a compaction hole (an expired
// tombstone) right before the records of a transaction that is open when
// mirrored and then aborted: the fillers copy its first record, so they must
// be appended in its destination transaction and be aborted with it,
// invisible to read_committed consumers as the hole is on the source.
func TestFillersShareTheTransaction(t *testing.T) {
	const topic = "filler-txn"
	e := newTestEnv(t, 1, map[string]int32{topic: 1})
	ctx := context.Background()
	e.compactSource(topic)
	plain := e.producer(kgo.NoCompression())
	txn := e.producer(kgo.NoCompression(), kgo.TransactionalID("filler-txn"))
	produce := func(cl *kgo.Client, key string, value []byte) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(plain, "k0", []byte("kept")) // 0
	produce(plain, "k1", nil)            // 1: a tombstone, a hole once compacted
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(txn, "k2", []byte("aborted")) // 2
	e.src.Compact()
	var layout []string
	holeBeforeTxn := false
	next := e.offsets(e.srcAdm, true, topic)[0]
	for _, b := range e.rawBatches(e.src, e.srcCl, topic, 0, next) {
		rb, _ := parseBatch(b)
		layout = append(layout, fmt.Sprintf("%d..%d n=%d attrs=%#x", rb.FirstOffset, rb.FirstOffset+int64(rb.LastOffsetDelta), rb.NumRecords, rb.Attributes))
		if rb.FirstOffset > next && rb.Attributes&attrTransactional != 0 {
			holeBeforeTxn = true
		}
		next = batchNext(b)
	}
	if !holeBeforeTxn {
		t.Fatalf("no compaction hole right before the transaction's batch: %v", layout)
	}

	m := e.newManager()
	startAll(t, m, topic, []int32{0})
	e.waitCaughtUp(m, topic, []int32{0})
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	produce(plain, "k3", []byte("after")) // 4
	e.waitCaughtUp(m, topic, []int32{0})

	readCommitted := func(c *kfake.Cluster) []*kgo.Record {
		cl := e.client(c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
		defer cl.Close()
		var out []*kgo.Record
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		for pctx.Err() == nil && (len(out) == 0 || out[len(out)-1].Offset < 4) {
			out = append(out, cl.PollFetches(pctx).Records()...)
		}
		return out
	}
	src, dst := readCommitted(e.src), readCommitted(e.dst)
	var got, want []string
	for _, r := range src {
		want = append(want, fmt.Sprintf("%d %s=%s", r.Offset, r.Key, r.Value))
	}
	for _, r := range dst {
		got = append(got, fmt.Sprintf("%d %s=%s", r.Offset, r.Key, r.Value))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed views differ:\nsource      %v\ndestination %v", want, got)
	}
}
