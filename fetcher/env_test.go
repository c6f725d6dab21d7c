package fetcher

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

const (
	testMirror  = "m1"
	waitTimeout = 60 * time.Second
)

// testEnv is a source and a one-broker destination kfake cluster with the
// same topics, and what a test needs to drive a Manager between them.
type testEnv struct {
	t        testing.TB
	src, dst *kfake.Cluster
	srcAdm   *kadm.Client
	dstAdm   *kadm.Client
	srcCl    *kgo.Client // admin and raw reads on the source
	dstCl    *kgo.Client // admin, direct writes and raw reads on the destination
	local    *kgo.Client // the Manager's destination client
	reg      *prometheus.Registry
	events   *eventLog

	mu        sync.Mutex
	producers map[string]*kgo.Client
}

// eventLog records OnStateChange and OnNotLeader calls.
type eventLog struct {
	mu        sync.Mutex
	states    []PartitionStatus
	notLeader []Partition
}

func (l *eventLog) state(st PartitionStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states = append(l.states, st)
}

func (l *eventLog) lostLeadership(p Partition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notLeader = append(l.notLeader, p)
}

// statesOf returns the sequence of states p went through.
func (l *eventLog) statesOf(p Partition) []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []State
	for _, st := range l.states {
		if st.Partition == p {
			out = append(out, st.State)
		}
	}
	return out
}

func (l *eventLog) notLeaders() []Partition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.notLeader)
}

// newTestEnv starts the clusters; topics maps topic names to partition
// counts, created on both.
func newTestEnv(t testing.TB, srcBrokers int, topics map[string]int32) *testEnv {
	t.Helper()
	seed := func() []kfake.Opt {
		var opts []kfake.Opt
		for topic, n := range topics {
			opts = append(opts, kfake.SeedTopics(n, topic))
		}
		return opts
	}
	src, err := kfake.NewCluster(append(seed(), kfake.NumBrokers(srcBrokers))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	dst, err := kfake.NewCluster(append(seed(), kfake.NumBrokers(1))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Close)
	e := &testEnv{t: t, src: src, dst: dst, reg: prometheus.NewRegistry(), events: &eventLog{}, producers: make(map[string]*kgo.Client)}
	e.srcCl = e.client(src)
	e.dstCl = e.client(dst)
	e.local = e.client(dst)
	e.srcAdm = kadm.NewClient(e.srcCl)
	e.dstAdm = kadm.NewClient(e.dstCl)
	return e
}

func (e *testEnv) client(c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// newManager starts a Manager with fast test timings and the mirror testMirror.
func (e *testEnv) newManager(opts ...Opt) *Manager {
	e.t.Helper()
	base := []Opt{
		LocalClient(e.local),
		LocalBrokerID(0),
		Logger(zaptest.NewLogger(e.t, zaptest.Level(zap.InfoLevel))),
		Registerer(e.reg),
		Backoff(10*time.Millisecond, 200*time.Millisecond),
		FetchMaxWait(50 * time.Millisecond),
		OnStateChange(e.events.state),
		OnNotLeader(e.events.lostLeadership),
	}
	m, err := NewManager(append(base, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Close)
	if err := m.SetMirror(testMirror, []kgo.Opt{kgo.SeedBrokers(e.src.ListenAddrs()...)}, MirrorSettings{}); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// producer returns a source producer for codec (one per codec).
func (e *testEnv) producer(codec kgo.CompressionCodec, opts ...kgo.Opt) *kgo.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := fmt.Sprint(codec)
	if cl := e.producers[key]; cl != nil && len(opts) == 0 {
		return cl
	}
	cl := e.client(e.src, append([]kgo.Opt{
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if len(opts) == 0 {
		e.producers[key] = cl
	}
	return cl
}

// record returns the i-th test record of a partition: keys, values and
// headers of several shapes, nulls and empties included.
// txn writes records from..from+n-1 (record) to topic's partition in one
// transaction of the transactional client cl and commits or aborts it.
func (e *testEnv) txn(cl *kgo.Client, topic string, partition int32, from, n int, commit bool) {
	e.t.Helper()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		recs = append(recs, record(topic, partition, from+i))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		e.t.Fatal(err)
	}
}

func record(topic string, partition int32, i int) *kgo.Record {
	r := &kgo.Record{
		Topic:     topic,
		Partition: partition,
		Timestamp: time.UnixMilli(1700000000000 + int64(i)*13),
		Key:       fmt.Appendf(nil, "key-%d-%d", partition, i%17),
		Value:     fmt.Appendf(nil, "value %d of %s/%d: %s", i, topic, partition, "lorem ipsum dolor sit amet"),
	}
	switch i % 6 {
	case 1:
		r.Key = nil
	case 2:
		r.Value = nil
	case 3:
		r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "empty", Value: []byte{}}, {Key: "null"}}
	case 4:
		r.Key, r.Value = []byte{}, []byte{}
	}
	return r
}

// produce writes records [from, from+n) of each partition to the source in
// batches of batchSize records.
func (e *testEnv) produce(cl *kgo.Client, topic string, partitions []int32, from, n, batchSize int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for start := from; start < from+n; start += batchSize {
		var recs []*kgo.Record
		for _, p := range partitions {
			for i := start; i < min(start+batchSize, from+n); i++ {
				recs = append(recs, record(topic, p, i))
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			e.t.Fatalf("produce: %v", err)
		}
	}
}

// offsets lists the start or end offsets of topic's partitions, retrying
// while leadership moves.
func (e *testEnv) offsets(adm *kadm.Client, start bool, topic string) map[int32]int64 {
	e.t.Helper()
	list := adm.ListEndOffsets
	if start {
		list = adm.ListStartOffsets
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		listed, err := list(ctx, topic)
		cancel()
		out := make(map[int32]int64)
		if err == nil {
			listed.Each(func(o kadm.ListedOffset) {
				if o.Err != nil && err == nil {
					err = fmt.Errorf("list offsets %s/%d: %w", o.Topic, o.Partition, o.Err)
				}
				out[o.Partition] = o.Offset
			})
		}
		if err == nil {
			return out
		}
		if time.Now().After(deadline) {
			e.t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCaughtUp waits until every listed partition is MIRRORING with the
// destination LEO at the source end offset and lag 0.
func (e *testEnv) waitCaughtUp(m *Manager, topic string, partitions []int32) {
	e.t.Helper()
	var last []PartitionStatus
	deadline := time.Now().Add(waitTimeout)
	for {
		ends := e.offsets(e.srcAdm, false, topic)
		last = m.Status()
		byP := make(map[int32]PartitionStatus)
		for _, st := range last {
			if st.Topic == topic {
				byP[st.Partition.Partition] = st
			}
		}
		done := true
		for _, p := range partitions {
			st, ok := byP[p]
			if !ok || st.State == StateFailed {
				e.t.Fatalf("partition %s/%d: not running or failed: %+v", topic, p, st)
			}
			if st.State != StateMirroring || st.DestinationLogEndOffset != ends[p] || st.Lag != 0 {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("not caught up after %s: source ends %v, status %+v", waitTimeout, ends, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitState waits until p is in state st and returns its status.
func waitState(t *testing.T, m *Manager, p Partition, st State) PartitionStatus {
	t.Helper()
	var got PartitionStatus
	testwait.For(t, waitTimeout, fmt.Sprintf("%s in state %s", p, st), func() bool {
		for _, s := range m.Status() {
			if s.Partition == p {
				got = s
				return s.State == st
			}
		}
		return false
	})
	return got
}

// readAll consumes every record of topic from a cluster, per partition.
func (e *testEnv) readAll(c *kfake.Cluster, adm *kadm.Client, topic string) map[int32][]*kgo.Record {
	e.t.Helper()
	starts, ends := e.offsets(adm, true, topic), e.offsets(adm, false, topic)
	out := make(map[int32][]*kgo.Record)
	parts := make(map[int32]kgo.Offset)
	for p, end := range ends {
		if end > starts[p] {
			parts[p] = kgo.NewOffset().At(starts[p])
		}
	}
	if len(parts) == 0 {
		return out
	}
	cl := e.client(c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchMaxWait(50*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	complete := func() bool {
		for p := range parts {
			rs := out[p]
			if len(rs) == 0 || rs[len(rs)-1].Offset < ends[p]-1 {
				return false
			}
		}
		return true
	}
	for !complete() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachError(func(t string, p int32, err error) { e.t.Fatalf("reading %s/%d: %v", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = append(out[r.Partition], r) })
	}
	return out
}

// compareTopic checks that the destination holds exactly the source's
// records of topic: same log start and end offsets, and per offset the same
// key, value, headers and timestamp (null and empty told apart).
func (e *testEnv) compareTopic(topic string) (records int) {
	e.t.Helper()
	srcStart, dstStart := e.offsets(e.srcAdm, true, topic), e.offsets(e.dstAdm, true, topic)
	srcEnd, dstEnd := e.offsets(e.srcAdm, false, topic), e.offsets(e.dstAdm, false, topic)
	for p := range srcEnd {
		if srcStart[p] != dstStart[p] || srcEnd[p] != dstEnd[p] {
			e.t.Fatalf("%s/%d: source offsets %d..%d, destination %d..%d", topic, p, srcStart[p], srcEnd[p], dstStart[p], dstEnd[p])
		}
	}
	src, dst := e.readAll(e.src, e.srcAdm, topic), e.readAll(e.dst, e.dstAdm, topic)
	for p, srs := range src {
		drs := dst[p]
		if len(srs) != len(drs) {
			e.t.Fatalf("%s/%d: %d source records, %d destination records", topic, p, len(srs), len(drs))
		}
		for i, s := range srs {
			d := drs[i]
			if s.Offset != d.Offset || !sameBytes(s.Key, d.Key) || !sameBytes(s.Value, d.Value) ||
				!s.Timestamp.Equal(d.Timestamp) || len(s.Headers) != len(d.Headers) {
				e.t.Fatalf("%s/%d record %d differs:\nsource      %d %q %q %v %v\ndestination %d %q %q %v %v", topic, p, i,
					s.Offset, s.Key, s.Value, s.Timestamp, s.Headers, d.Offset, d.Key, d.Value, d.Timestamp, d.Headers)
			}
			for j := range s.Headers {
				if s.Headers[j].Key != d.Headers[j].Key || !sameBytes(s.Headers[j].Value, d.Headers[j].Value) {
					e.t.Fatalf("%s/%d offset %d: header %d differs", topic, p, s.Offset, j)
				}
			}
		}
		records += len(srs)
	}
	return records
}

// writeMarkerAgain writes the destination's transaction marker at offset
// at of topic's partition 0 once more, with its producer ID and epoch, as a
// transaction coordinator does when it retries (WriteTxnMarkers).
func (e *testEnv) writeMarkerAgain(topic string, at int64) {
	e.t.Helper()
	var pid int64 = -1
	var epoch int16
	for _, raw := range e.rawBatches(e.dst, e.dstCl, topic, 0, 0) {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			e.t.Fatal(err)
		}
		if rb.FirstOffset == at && rb.Attributes&attrControl != 0 {
			pid, epoch = rb.ProducerID, rb.ProducerEpoch
		}
	}
	if pid < 0 {
		e.t.Fatalf("no marker at destination offset %d", at)
	}
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed = pid, epoch, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	mk.Topics = append(mk.Topics, mt)
	wm.Markers = append(wm.Markers, mk)
	if _, err := wm.RequestWith(context.Background(), e.dstCl); err != nil {
		e.t.Fatal(err)
	}
}

// rawBatches fetches the raw batches of a partition from offset from on.
func (e *testEnv) rawBatches(c *kfake.Cluster, cl *kgo.Client, topic string, partition int32, from int64) [][]byte {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out [][]byte
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 50<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.Partitions = append(rt.Partitions, newFetchPartition(partition, from, 10<<20))
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(c.LeaderFor(topic, partition))).Request(ctx, &fetchRequest{req})
		if err != nil {
			e.t.Fatal(err)
		}
		rp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			e.t.Fatalf("raw fetch %s/%d at %d: error %d", topic, partition, from, rp.ErrorCode)
		}
		raw := rp.RecordBatches
		n := len(out)
		for {
			b, err := nextBatch(raw)
			if err != nil {
				e.t.Fatal(err)
			}
			if b == nil {
				break
			}
			raw = raw[len(b):]
			out = append(out, b)
			from = batchNext(b)
		}
		if len(out) == n {
			return out
		}
	}
}

// compareRawBatches checks that the destination batches of a partition are
// the source batches with only the producer fields (and the CRC) changed:
// same base offsets, attributes (codec), timestamps, and byte-identical
// records sections. No recompression happened, except that a run of
// consecutive small source batches (coalescible) may have become one
// destination batch with their attributes and offset range (compareTopic
// checks their records). It returns the number of source batches.
func (e *testEnv) compareRawBatches(topic string, partition int32, from int64) int {
	n, _ := e.compareBatches(topic, partition, from, false)
	return n
}

// compareBatches is compareRawBatches; with strict, no source batch may
// have been coalesced. It also returns the number of source batches that
// were.
func (e *testEnv) compareBatches(topic string, partition int32, from int64, strict bool) (batches, coalesced int) {
	e.t.Helper()
	src := e.rawBatches(e.src, e.srcCl, topic, partition, from)
	dst := e.rawBatches(e.dst, e.dstCl, topic, partition, from)
	si := 0
	for i, d := range dst {
		if si >= len(src) {
			e.t.Fatalf("%s/%d: destination batch %d (offset %d) beyond the source's %d batches", topic, partition, i, batchBase(d), len(src))
		}
		s := src[si]
		if batchNext(s) != batchNext(d) && s[offAttributes+1]&attrControl == 0 {
			// A coalesced batch: it spans whole small source batches of
			// its attributes.
			end := si
			for end < len(src) && batchNext(src[end]) < batchNext(d) {
				end++
			}
			if strict || batchBase(s) != batchBase(d) || end == len(src) || batchNext(src[end]) != batchNext(d) {
				e.t.Fatalf("%s/%d: destination batch %d (offsets %d..%d) does not match source batches", topic, partition, i, batchBase(d), batchNext(d)-1)
			}
			for _, sb := range src[si : end+1] {
				rb, err := parseBatch(sb)
				// A transactional batch is coalesced only with its
				// producer's batches of the same transaction.
				sameProducer := rb.Attributes&attrTransactional == 0 || slices.Equal(sb[offProducerID:offBaseSequence], s[offProducerID:offBaseSequence])
				if err != nil || !coalescible(sb, &rb) || !sameProducer || !slices.Equal(sb[offAttributes:offAttributes+2], d[offAttributes:offAttributes+2]) {
					e.t.Fatalf("%s/%d: destination batch %d (offsets %d..%d) holds the source batch at %d, which may not be coalesced (%d bytes, attributes %#x, %v)",
						topic, partition, i, batchBase(d), batchNext(d)-1, batchBase(sb), len(sb), rb.Attributes, err)
				}
			}
			if !crcValid(d) {
				e.t.Fatalf("%s/%d batch %d: destination CRC invalid", topic, partition, i)
			}
			coalesced += end + 1 - si
			si = end + 1
			continue
		}
		si++
		if s[offAttributes+1]&attrControl != 0 {
			// The destination writes its own markers: same offset,
			// attributes and outcome; timestamps and coordinator epoch
			// are its own.
			srb, err1 := parseBatch(s)
			drb, err2 := parseBatch(d)
			if err1 != nil || err2 != nil {
				e.t.Fatalf("%s/%d batch %d: %v %v", topic, partition, i, err1, err2)
			}
			sc, err1 := markerCommits(&srb)
			dc, err2 := markerCommits(&drb)
			if batchBase(s) != batchBase(d) || srb.Attributes != drb.Attributes || err1 != nil || err2 != nil || sc != dc {
				e.t.Fatalf("%s/%d batch %d: source marker at %d (commit %v, %v), destination batch at %d (commit %v, %v, attributes %#x)",
					topic, partition, i, batchBase(s), sc, err1, batchBase(d), dc, err2, drb.Attributes)
			}
			continue
		}
		if batchBase(s) != batchBase(d) || !slices.Equal(s[offAttributes:offProducerID], d[offAttributes:offProducerID]) ||
			!slices.Equal(s[57:], d[57:]) {
			e.t.Fatalf("%s/%d batch %d (offset %d) differs beyond the producer fields", topic, partition, i, batchBase(s))
		}
		if !crcValid(d) {
			e.t.Fatalf("%s/%d batch %d: destination CRC invalid", topic, partition, i)
		}
	}
	if si != len(src) {
		e.t.Fatalf("%s/%d: %d source batches, the destination's cover %d", topic, partition, len(src), si)
	}
	return len(src), coalesced
}
